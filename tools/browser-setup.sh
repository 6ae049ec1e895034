#!/bin/sh
# Set up the real-browser test (tools/browser_test.py): Debian's Chromium, and the pinned Playwright in VENV.
# Playwright drives the system browser; it never downloads one (`playwright install` is not needed).
#   tools/browser-setup.sh VENV        e.g. tools/browser-setup.sh .venv-teach
set -eu
VENV=${1:?usage: tools/browser-setup.sh VENV}
HERE=$(cd "$(dirname "$0")/.." && pwd)

if [ ! -x /usr/bin/chromium ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "/usr/bin/chromium is missing: as root, run apt-get update && apt-get install -y chromium" >&2
        exit 2
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

PIN=$(cat "$HERE/requirements-browser.txt")
if ! "$VENV/bin/python" -m pip show playwright 2>/dev/null | grep -qx "Version: ${PIN#*==}"; then
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$HERE/requirements-browser.txt"
fi
echo "browser test ready: $(/usr/bin/chromium --version 2>/dev/null), playwright ${PIN#*==} in $VENV"
