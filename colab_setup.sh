#!/usr/bin/env bash
# Make the course package `mllm_utils` importable in Google Colab (or any Python
# that already has PyTorch), without touching that PyTorch and without a
# runtime restart. The notebooks' first code cell runs this inside Colab only:
#
#     bash colab_setup.sh [PYTHON]      # PYTHON: the kernel's interpreter (default: python3)
#
# - installs the package from this folder (not editable: an editable install
#   would only be seen after a restart) and whatever dependency is missing;
# - pins the torch and numpy already installed, so pip never swaps them;
# - does nothing when the installed package already matches this folder;
# - stops with a message on any error.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${1:-python3}"

fail() { echo "colab_setup.sh: $*" >&2; exit 1; }

"$python" -c "import sys; assert sys.version_info >= (3, 10)" 2>/dev/null ||
  fail "$python is not Python 3.10 or newer."
# Pins come from the installed packages' metadata, which is what pip compares a constraint with.
# torch.__version__ can say more: a torch from the package registry reports "2.11.0+cu130" while its
# package is "2.11.0", and a pin on the former matches nothing installed (ResolutionImpossible).
version_of() { "$python" -c "from importlib.metadata import version; print(version('$1'))" 2>/dev/null; }
torch_version="$(version_of torch)" && "$python" -c "import torch" 2>/dev/null ||
  fail "PyTorch is not installed for $python. Install it first (pip install torch), then rerun."

# Up to date already? Same files as this folder and every dependency satisfied.
if "$python" - "$here" <<'PY'
import sys
from importlib import metadata
from pathlib import Path

try:
    from packaging.requirements import Requirement
except ImportError:  # pip vendors packaging
    from pip._vendor.packaging.requirements import Requirement

repo = Path(sys.argv[1])
try:
    dist = metadata.distribution("mllm-utils")
except metadata.PackageNotFoundError:
    sys.exit(1)
installed = {str(f): f for f in dist.files or []}
for source in (repo / "mllm_utils").rglob("*"):
    if source.is_dir() or "__pycache__" in source.parts:
        continue
    rel = source.relative_to(repo).as_posix()
    if rel not in installed or Path(dist.locate_file(rel)).read_bytes() != source.read_bytes():
        sys.exit(1)
for line in dist.requires or []:
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    try:
        version = metadata.version(req.name)
    except metadata.PackageNotFoundError:
        sys.exit(1)
    if not req.specifier.contains(version, prereleases=True):
        sys.exit(1)
sys.exit(0)
PY
then
  echo "mllm_utils is installed and up to date; torch $torch_version untouched. Nothing to do."
  exit 0
fi

constraints="$(mktemp)"
trap 'rm -f "$constraints"' EXIT
echo "torch==$torch_version" >"$constraints"
numpy_version="$(version_of numpy)" && echo "numpy==$numpy_version" >>"$constraints"

echo "Installing mllm_utils from $here (keeping torch $torch_version)..."
"$python" -m pip install --quiet --disable-pip-version-check --constraint "$constraints" "$here" ||
  fail "pip could not install mllm_utils (see the messages above)."

after="$(version_of torch)"
[ "$after" = "$torch_version" ] || fail "torch changed from $torch_version to $after; please report this."
"$python" -c "import mllm_utils" || fail "mllm_utils was installed but does not import."
echo "mllm_utils installed; torch $torch_version untouched. No restart needed."
