"""The jute codecs are generated source (``wire/codecs.py``, ``python -m zkpy.wire.codegen``): the
file is what the records' annotations give, every record is bound to it, and a record the file
does not match is refused at import rather than encoded wrongly."""

from __future__ import annotations

import subprocess
import sys

import pytest

from zkpy.wire import codecs, jute
from zkpy.wire.jute import Int, Record, StaleCodecs, UString, jute_record
from zkpy.wire.proto import Stat


def test_regenerating_the_codecs_gives_the_same_text() -> None:
    proc = subprocess.run([sys.executable, "-m", "zkpy.wire.codegen", "--check"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr


def test_a_record_reads_and_writes_through_the_generated_functions() -> None:
    assert Stat.read is codecs.proto_Stat_read and Stat.write is codecs.proto_Stat_write  # type: ignore[attr-defined, comparison-overlap]
    stat = Stat(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
    assert Stat.from_bytes(stat.to_bytes()) == stat
    assert len(codecs.SOURCES) == sum(1 for name in vars(codecs) if name.endswith("_read"))


def test_a_record_the_file_does_not_hold_is_refused() -> None:
    assert not jute.GENERATING
    with pytest.raises(StaleCodecs, match="python -m zkpy.wire.codegen"):
        @jute_record
        class NotGenerated(Record):
            name: UString
            size: Int
