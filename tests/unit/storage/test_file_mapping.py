"""``FileMapping``: a mapping keeps no descriptor, writes reach the file, and every mapping is
advised ``MADV_RANDOM`` (no read-ahead: a fault on a preallocated index must not make the
kernel zero a large folio of holes around it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from strata.storage.file_mapping import FileMapping, map_file


def _vm_flags(address: int) -> list[str]:
    """The ``VmFlags`` of the mapping that starts at ``address`` (``/proc/self/smaps``)."""
    start = f"{address:x}-"
    found = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            if line.startswith(start):
                found = True
            elif found and line.startswith("VmFlags:"):
                return line.split()[1:]
    raise AssertionError(f"no mapping at {address:#x}")


def _mapped(tmp_path: Path, length: int, writable: bool = True) -> tuple[Path, FileMapping]:
    path = tmp_path / "00000000000000000000.index"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        os.ftruncate(fd, length)
        return path, map_file(fd, length, writable)
    finally:
        os.close(fd)


def test_writes_reach_the_file_and_no_descriptor_is_kept(tmp_path: Path) -> None:
    before = len(os.listdir("/proc/self/fd"))
    path, mapping = _mapped(tmp_path, 1 << 20)
    assert len(os.listdir("/proc/self/fd")) == before
    mapping.view[4096:4104] = b"12345678"
    mapping.flush()
    mapping.close()
    with open(path, "rb") as f:
        f.seek(4096)
        assert f.read(8) == b"12345678"


@pytest.mark.parametrize("writable", [True, False])
def test_every_mapping_is_advised_random(tmp_path: Path, writable: bool) -> None:
    _, mapping = _mapped(tmp_path, 10 << 20, writable)
    try:
        assert mapping._address is not None
        assert "rr" in _vm_flags(mapping._address)  # VM_RAND_READ
    finally:
        mapping.close()
