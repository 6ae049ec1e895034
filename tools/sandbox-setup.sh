#!/bin/sh
# Set up the grading sandbox (mllm_classroom.sandbox): Debian's bubblewrap, which the classroom tests use.
# A teacher's machine needs the same package: TEACHING.md, "What grading protects against".
set -eu
if ! command -v bwrap >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "bwrap is missing: as root, run apt-get update && apt-get install -y bubblewrap" >&2
        exit 2
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
fi
echo "grading sandbox ready: $(bwrap --version)"
