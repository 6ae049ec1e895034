"""colab_setup.sh, run as Colab would: a Python that already has torch.

A temporary virtual environment stands in for Colab's runtime. Its "torch" is
a small stand-in distribution (version 2.11.0, Colab's today) in both shapes a
real one comes in: from PyTorch's own index (Colab's), the local label is in
the package version and in ``torch.__version__`` ("2.11.0+cpu"); from the
package registry, only ``torch.__version__`` carries it ("2.11.0+cu130" for a
package "2.11.0"). Any
attempt by pip to replace it shows up as changed files. The script must install
the package and what is missing, leave torch alone, make the package importable
in an interpreter that was already running, change nothing on a second run,
and fail loudly on error. It needs the package registry for the dependencies.
"""

import hashlib
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COPY = ["colab_setup.sh", "pyproject.toml", "README.md", "LICENSE", "mllm_utils"]


# (torch.__version__, the installed package's version)
TORCH_SHAPES = {"pytorch-index": ("2.11.0+cpu", "2.11.0+cpu"), "registry": ("2.11.0+cu130", "2.11.0")}


def make_fake_torch(site: Path, module_version: str, package_version: str) -> None:
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(f'__version__ = "{module_version}"\n', encoding="utf-8")
    info = site / f"torch-{package_version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {package_version}\n",
                                   encoding="utf-8")
    (info / "INSTALLER").write_text("colab\n", encoding="utf-8")
    (info / "RECORD").write_text(
        f"torch/__init__.py,,\n{info.name}/METADATA,,\n{info.name}/RECORD,,\n", encoding="utf-8"
    )


def snapshot(site: Path) -> dict:
    """Every file below site-packages (bytecode aside) with its content hash."""
    return {
        str(p.relative_to(site)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(site.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.fixture(scope="module", params=sorted(TORCH_SHAPES))
def colab(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("colab")
    repo = tmp / "mllm-course"
    repo.mkdir()
    for name in COPY:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, repo / name)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
    )
    make_fake_torch(site, *TORCH_SHAPES[request.param])
    return repo, python, site


def run_setup(repo, python):
    return subprocess.run(
        ["bash", str(repo / "colab_setup.sh"), str(python)],
        capture_output=True, text=True, timeout=900, cwd=repo.parent,
    )


def test_installs_without_touching_torch_or_restarting(colab):
    repo, python, site = colab
    torch_before = {k: v for k, v in snapshot(site).items() if k.startswith("torch")}
    # An interpreter that is already running (the notebook's kernel) runs the
    # setup, then imports the package without a restart.
    kernel = textwrap.dedent(f"""
        import importlib, subprocess, sys
        try:
            import mllm_utils
            raise SystemExit("mllm_utils importable before setup: the test proves nothing")
        except ImportError:
            pass
        result = subprocess.run(["bash", {str(repo / "colab_setup.sh")!r}, sys.executable],
                                capture_output=True, text=True)
        print(result.stdout, result.stderr)
        assert result.returncode == 0, result.stderr
        importlib.invalidate_caches()
        import mllm_utils, torch
        print("imported", mllm_utils.__version__, "from", mllm_utils.__file__, "torch", torch.__version__)
    """)
    result = subprocess.run(
        [python, "-c", kernel], capture_output=True, text=True, timeout=900, cwd=repo.parent
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "imported 0.1.0" in result.stdout and "torch 2.11.0" in result.stdout, result.stdout
    assert "Installing mllm_utils" in result.stdout, "the first run installs"
    assert str(site) in result.stdout, "the package must be installed (not imported from the clone)"
    torch_after = {k: v for k, v in snapshot(site).items() if k.startswith("torch")}
    assert torch_after == torch_before, "colab_setup.sh changed the installed torch"


def test_second_run_changes_nothing(colab):
    repo, python, site = colab
    before = snapshot(site)
    result = run_setup(repo, python)
    assert result.returncode == 0, result.stderr
    assert "Nothing to do" in result.stdout
    assert snapshot(site) == before


def test_changed_source_is_reinstalled(colab):
    repo, python, site = colab
    text = repo / "mllm_utils" / "text.py"
    text.write_text(text.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    result = run_setup(repo, python)
    assert result.returncode == 0, result.stderr
    assert "Installing mllm_utils" in result.stdout
    installed = site / "mllm_utils" / "text.py"
    assert installed.read_text(encoding="utf-8").endswith("# edited\n")


def test_fails_loudly_without_torch(tmp_path):
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    result = run_setup(ROOT, venv / "bin" / "python")
    assert result.returncode != 0
    assert "PyTorch is not installed" in result.stderr


def test_fails_loudly_when_pip_fails(colab, tmp_path):
    repo, python, _ = colab
    broken = tmp_path / "broken"
    shutil.copytree(repo, broken)
    (broken / "pyproject.toml").write_text("[project\nthis is not toml", encoding="utf-8")
    (broken / "mllm_utils" / "text.py").write_text("# differs, so an install is attempted\n", encoding="utf-8")
    result = run_setup(broken, python)
    assert result.returncode != 0
    assert "pip could not install mllm_utils" in result.stderr
