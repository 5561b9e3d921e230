"""Every jute record of the client protocol and the txn log round-trips, for any field values.

Strategies are built from each class's ``JUTE_FIELDS`` (the jute type of every field), so a
record added to proto.py or txn.py is covered without touching this file.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.jute_strategies import ANY_RECORD, RECORDS
from zkpy.errors import ProtocolError
from zkpy.wire import proto, txn
from zkpy.wire.jute import Record


def test_every_record_class_is_found() -> None:
    names = {c.__name__ for c in RECORDS}
    # a few from each module, so a broken discovery cannot pass vacuously
    assert {"ConnectRequest", "Stat", "CreateRequest", "GetChildren2Response", "WatcherEvent"} <= names
    assert {"TxnHeader", "CreateTxn", "MultiTxn", "CloseSessionTxn", "TxnDigest"} <= names
    assert len(RECORDS) >= 60


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: c.__name__)
def test_jute_fields_follow_the_dataclass_fields(cls: type[Record]) -> None:
    import dataclasses

    assert [f.name for f in dataclasses.fields(cls)] == [name for name, _ in cls.JUTE_FIELDS]  # type: ignore[arg-type]


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(ANY_RECORD)
def test_record_round_trips(case: tuple[type[Record], Any]) -> None:
    cls, rec = case
    data = rec.to_bytes()
    back = cls.from_bytes(data)
    assert back == rec
    assert back.to_bytes() == data
    obj, end = cls.read(data, 0)
    assert end == len(data)  # a record consumes exactly its own bytes


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(ANY_RECORD, st.binary(max_size=16))
def test_record_reads_from_an_offset_inside_a_larger_buffer(case: tuple[type[Record], Any], tail: bytes) -> None:
    cls, rec = case
    data = b"\xaa\xbb\xcc" + rec.to_bytes() + tail
    obj, end = cls.read(data, 3)
    assert obj == rec
    assert end == len(data) - len(tail)


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(ANY_RECORD, st.data())
def test_every_strict_prefix_is_a_protocol_error(case: tuple[type[Record], Any], data: st.DataObject) -> None:
    cls, rec = case
    full = rec.to_bytes()
    if not full:
        return  # a record without fields has no strict prefix
    cut = data.draw(st.integers(0, len(full) - 1), label="cut")
    with pytest.raises(ProtocolError):
        cls.from_bytes(full[:cut])


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(RECORDS), st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_raise_protocol_error(cls: type[Record], data: bytes) -> None:
    """Whatever a peer sends, decoding fails only with ProtocolError; what decodes re-encodes
    to the bytes it was read from (up to null-vector and invalid-UTF-8 normalisation)."""
    try:
        rec = cls.from_bytes(data)
    except ProtocolError:
        return
    again = cls.from_bytes(rec.to_bytes())
    assert again == rec


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: c.__name__)
def test_null_vector_reads_as_empty_and_null_strings_stay_null(cls: type[Record]) -> None:
    """Jute writes null as length -1: a null ustring/buffer stays None, a null vector reads as []."""
    out = bytearray()
    expected: dict[str, Any] = {}
    for name, jt in cls.JUTE_FIELDS:
        if jt in ("ustring", "buffer") or isinstance(jt, tuple):
            out += b"\xff\xff\xff\xff"
            expected[name] = [] if isinstance(jt, tuple) else None
        else:
            sample = _zero(jt)
            expected[name] = sample
            out += _zero_bytes(jt)
    assert cls.from_bytes(bytes(out)) == cls(**expected)


def _zero(jt: Any) -> Any:
    if jt in ("int", "long"):
        return 0
    if jt == "boolean":
        return False
    return _zero_record(jt)


def _zero_record(cls: type[Record]) -> Any:
    values = {}
    for name, jt in cls.JUTE_FIELDS:
        if jt in ("ustring", "buffer"):
            values[name] = None
        elif isinstance(jt, tuple):
            values[name] = []
        else:
            values[name] = _zero(jt)
    return cls(**values)


def _zero_bytes(jt: Any) -> bytes:
    if jt == "int":
        return bytes(4)
    if jt == "long":
        return bytes(8)
    if jt == "boolean":
        return bytes(1)
    return _zero_record(jt).to_bytes()


def test_known_encodings() -> None:
    """A few hand-checked byte layouts (big-endian, no tags, -1 for null)."""
    assert proto.RequestHeader(1, 4).to_bytes() == bytes.fromhex("00000001 00000004")
    assert proto.ReplyHeader(-1, -1, 0).to_bytes() == bytes.fromhex("ffffffff ffffffffffffffff 00000000")
    assert proto.GetDataRequest("/a", True).to_bytes() == bytes.fromhex("00000002 2f61 01")
    assert proto.MultiHeader(-1, True, -1).to_bytes() == bytes.fromhex("ffffffff 01 ffffffff")
    assert proto.SetDataRequest("/", None, -1).to_bytes() == bytes.fromhex("00000001 2f ffffffff ffffffff")
    assert proto.ACL(31, proto.Id("world", "anyone")).to_bytes() == bytes.fromhex(
        "0000001f 00000005 776f726c64 00000006 616e796f6e65")
    assert txn.CloseSessionTxn([]).to_bytes() == bytes.fromhex("00000000")
    assert proto.Stat(*range(11)).to_bytes() == b"".join(
        v.to_bytes(8 if i in (0, 1, 2, 3, 7, 10) else 4, "big") for i, v in enumerate(range(11)))


def test_boolean_reads_any_nonzero_byte_as_true() -> None:
    """DataInput.readBoolean: any byte but 0 is true (and it re-encodes as 1)."""
    rec = proto.GetDataRequest.from_bytes(bytes.fromhex("00000001 2f 07"))
    assert rec.watch is True
    assert rec.to_bytes()[-1:] == b"\x01"


@pytest.mark.parametrize("length", [-2, -5, -(2**31)])
def test_negative_lengths_other_than_minus_one_are_protocol_errors(length: int) -> None:
    bad = length.to_bytes(4, "big", signed=True)
    with pytest.raises(ProtocolError):
        proto.GetDataRequest.from_bytes(bad + b"\x00")  # ustring
    with pytest.raises(ProtocolError):
        proto.SetSASLResponse.from_bytes(bad)  # buffer


def test_vector_count_beyond_the_frame_is_rejected_without_allocating() -> None:
    with pytest.raises(ProtocolError, match="vector count"):
        proto.GetChildrenResponse.from_bytes(bytes.fromhex("7fffffff"))


_ACLS = st.lists(st.builds(proto.ACL, st.integers(0, 31), st.builds(proto.Id, st.sampled_from(["world", "digest", "ip"]),
                                                                  st.sampled_from(["anyone", "u:p", "10.0.0.1", "u:pp"]))),
                 max_size=3)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_ACLS, st.binary(max_size=3)), min_size=1, max_size=8))
def test_acl_lists_read_in_turn_are_each_their_own(reqs: list[tuple[list[proto.ACL], bytes]]) -> None:
    """ACL vectors are memoised by their bytes (jute ``JUTE_VECTOR_MEMO``): requests read one
    after another, with the same or different ACLs, each decode to what was written, in lists of
    their own, from a buffer or a memoryview, and with the ACL's bytes cut short."""
    for acl, tail in reqs:
        data = proto.CreateRequest("/n", b"v", acl, 0).to_bytes()
        for buf in (data + tail, memoryview(data + tail)):
            got, end = proto.CreateRequest.read(buf, 0)
            assert (got.acl, end) == (acl, len(data))
            got.acl.append(proto.ACL(0, proto.Id("x", "y")))  # a caller's list: the memo keeps its own
        with pytest.raises((ProtocolError, struct.error)):
            proto.CreateRequest.read(data[: len(data) - 5], 0)


def test_plain_int_opcodes_agree_with_the_enum() -> None:
    """``OpNum`` and ``PermNum`` (the request path's plain ints) have every OpCode and Perms member, with its value."""
    from zkpy.wire.consts import OpCode, OpNum, PermNum, Perms

    assert {m.name: int(m) for m in OpCode} == {k: v for k, v in vars(OpNum).items() if k.isupper()}
    assert {name: int(m) for name, m in Perms.__members__.items()} == {k: v for k, v in vars(PermNum).items() if k.isupper()}
