"""``OsDisk.view``: a log is scanned through a read-only map of it, the same bytes ``read`` gives."""

from __future__ import annotations

import mmap
from pathlib import Path

import pytest

from zkpy.runtime.osdisk import OsDisk


def test_view_maps_the_file_read_only_and_gives_its_bytes(tmp_path: Path) -> None:
    path = tmp_path / "log.1"
    content = bytes(range(256)) * 100 + bytes(1 << 16)  # records, then preallocated zeros
    path.write_bytes(content)
    disk = OsDisk()
    view = disk.view(str(path))
    assert isinstance(view, mmap.mmap)
    assert view[:] == content == disk.read(str(path))
    assert view.find(b"\xff\x00", 0, len(content)) == 255 and view[300] == content[300]
    with pytest.raises(TypeError):  # read-only: a scan cannot change the log
        view[0:1] = b"x"
    view.close()


def test_an_empty_file_views_as_no_bytes(tmp_path: Path) -> None:
    path = tmp_path / "log.2"
    path.write_bytes(b"")
    assert OsDisk().view(str(path)) == b""
