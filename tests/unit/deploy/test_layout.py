"""The source layout: a module's import path is its file path below one of the fixed roots,
the built wheel holds every module of the tree, and no root folder shadows the standard library
for a Python started at the repository root."""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

from .deploy_tools import ROOT

ROOTS = ("storage", "services", "operator", "spark")


def source_modules() -> set[str]:
    """Every ``strata/...py`` file below the roots, as a path inside the wheel."""
    return {str(path.relative_to(ROOT / root)) for root in ROOTS
            for path in (ROOT / root).rglob("*.py") if "__pycache__" not in path.parts}


def test_no_root_folder_is_a_package() -> None:
    for root in ROOTS:
        assert not (ROOT / root / "__init__.py").exists(), root
        assert not (ROOT / root / "strata" / "__init__.py").exists(), root  # a namespace
    assert all(m.startswith("strata/") for m in source_modules())


def test_the_wheel_holds_every_module_of_the_tree(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                           "--no-build-isolation",
                           "-w", str(tmp_path), str(ROOT)],
                          capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = tmp_path.glob("strata-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = {name for name in archive.namelist() if name.endswith(".py")}
    expected = source_modules()
    assert len(expected) > 200
    assert expected - in_wheel == set()


def test_a_fresh_python_at_the_repository_root_imports_the_standard_library(
        tmp_path: Path) -> None:
    venv.create(tmp_path / "venv", with_pip=False)
    python = tmp_path / "venv" / "bin" / "python"
    done = subprocess.run(
        [str(python), "-c",
         "import json, collections, operator; from operator import eq; "
         "print(operator.__file__)"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert not done.stdout.strip().startswith(str(ROOT)), done.stdout
