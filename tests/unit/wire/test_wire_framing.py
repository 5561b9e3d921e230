"""Length framing (FrameDecoder) and multi-op framing (MultiOperationRecord / MultiResponse)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.jute_strategies import BUFFER, TEXT, USTRING, record_strategy
from zkpy.errors import ProtocolError
from zkpy.wire.consts import OpCode
from zkpy.wire.framing import FrameDecoder, frame
from zkpy.wire.jute import INT
from zkpy.wire.multi import (
    OP_RECORDS,
    Op,
    OpResult,
    read_multi_request,
    read_multi_response,
    write_multi_request,
    write_multi_response,
)
from zkpy.wire.proto import MultiHeader, Stat

MAX = 64  # a small jute.maxbuffer keeps the examples readable


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, last = [], 0
    for p in points:
        pieces.append(data[last:p])
        last = p
    pieces.append(data[last:])
    return pieces


# ---- FrameDecoder ----

PAYLOADS = st.lists(st.binary(max_size=MAX), max_size=8)


@settings(max_examples=500)
@given(PAYLOADS, st.lists(st.integers(0, 10_000), max_size=12))
def test_frames_survive_any_split_of_the_stream(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(frame(p) for p in payloads)
    dec = FrameDecoder(MAX)
    got: list[bytes] = []
    for piece in split_at(stream, cuts):
        dec.feed(piece)
        got += dec.frames()
    assert got == payloads
    assert dec.buffered == 0


@settings(max_examples=300)
@given(PAYLOADS, st.integers(1, 4))
def test_limit_hands_out_frames_a_few_at_a_time(payloads: list[bytes], limit: int) -> None:
    dec = FrameDecoder(MAX)
    dec.feed(b"".join(frame(p) for p in payloads))
    got: list[bytes] = []
    while True:
        batch = dec.frames(limit)
        assert len(batch) <= limit
        if not batch:
            break
        got += batch
    assert got == payloads


def test_exactly_max_buffer_passes_one_more_is_a_len_error() -> None:
    dec = FrameDecoder(MAX)
    dec.feed(frame(b"x" * MAX))
    assert dec.frames() == [b"x" * MAX]
    dec.feed(INT.pack(MAX + 1))  # the length alone is enough: the payload is never awaited
    with pytest.raises(ProtocolError, match=f"Len error: packet length {MAX + 1} .*jute.maxbuffer={MAX}"):
        dec.frames()


@pytest.mark.parametrize("length", [-1, -100, -(2**31), MAX + 1, 2**31 - 1])
def test_bad_lengths_are_len_errors(length: int) -> None:
    dec = FrameDecoder(MAX)
    dec.feed(INT.pack(length))
    with pytest.raises(ProtocolError, match="Len error"):
        dec.frames()


def test_length_split_across_feeds_is_checked_once_complete() -> None:
    dec = FrameDecoder(MAX)
    bad = INT.pack(MAX + 1)
    for b in bad[:3]:
        dec.feed(bytes([b]))
        assert dec.frames() == []
    dec.feed(bad[3:])
    with pytest.raises(ProtocolError):
        dec.frames()


def test_frames_before_a_bad_length_are_handed_over_first() -> None:
    """ZooKeeper processes each packet as it reads it: packets before a bad length still count."""
    dec = FrameDecoder(MAX)
    dec.feed(frame(b"one") + frame(b"two") + INT.pack(-1))
    assert dec.frames() == [b"one", b"two"]
    with pytest.raises(ProtocolError):
        dec.frames()


def test_zero_length_frame_is_a_frame() -> None:
    dec = FrameDecoder(MAX)
    dec.feed(frame(b"") + frame(b"a"))
    assert dec.frames() == [b"", b"a"]


def test_peek_does_not_consume() -> None:
    dec = FrameDecoder(MAX)
    dec.feed(b"ruok")
    assert dec.peek(4) == b"ruok"
    assert dec.buffered == 4


# ---- multi requests ----

STAT = record_strategy(Stat)


def op_strategy() -> st.SearchStrategy[Op]:
    return st.sampled_from(sorted(OP_RECORDS)).flatmap(
        lambda t: record_strategy(OP_RECORDS[t]).map(lambda rec: Op(t, rec)))


@settings(max_examples=500)
@given(st.lists(op_strategy(), max_size=6))
def test_multi_request_round_trips(ops: list[Op]) -> None:
    out = bytearray()
    write_multi_request(out, ops)
    back, end = read_multi_request(bytes(out), 0)
    assert back == ops
    assert end == len(out)
    again = bytearray()
    write_multi_request(again, back)
    assert again == out


def test_multi_request_layout() -> None:
    """Each op: MultiHeader(type, done=false, err=-1) then its record; the end: (-1, true, -1)."""
    from zkpy.wire.proto import CheckVersionRequest

    out = bytearray()
    write_multi_request(out, [Op(OpCode.CHECK, CheckVersionRequest("/a", 3))])
    assert bytes(out) == bytes.fromhex("0000000d 00 ffffffff 00000002 2f61 00000003 ffffffff 01 ffffffff")


@pytest.mark.parametrize("bad_type", [OpCode.SYNC, OpCode.EXISTS, 99, -1])
def test_multi_request_with_an_op_it_cannot_hold_is_a_protocol_error(bad_type: int) -> None:
    data = MultiHeader(bad_type, False, -1).to_bytes() + MultiHeader(-1, True, -1).to_bytes()
    with pytest.raises(ProtocolError):
        read_multi_request(data, 0)


@settings(max_examples=300)
@given(st.lists(op_strategy(), min_size=1, max_size=4), st.data())
def test_truncated_multi_request_fails(ops: list[Op], data: st.DataObject) -> None:
    out = bytearray()
    write_multi_request(out, ops)
    cut = data.draw(st.integers(0, len(out) - 1))
    # struct.error is what a short fixed-width read raises; the server maps it to MarshallingError
    with pytest.raises((ProtocolError, struct.error)):
        read_multi_request(bytes(out[:cut]), 0)


# ---- multi responses ----


def result_strategy() -> st.SearchStrategy[OpResult]:
    err_codes = st.sampled_from([-101, -110, -103, -111, -102, -8, -2, 0])
    return st.one_of(
        TEXT.map(lambda p: OpResult(OpCode.CREATE, 0, path=p)),
        st.tuples(st.sampled_from([OpCode.CREATE2, OpCode.CREATE_TTL, OpCode.CREATE_CONTAINER]), TEXT, STAT)
        .map(lambda a: OpResult(a[0], 0, path=a[1], stat=a[2])),
        STAT.map(lambda s: OpResult(OpCode.SET_DATA, 0, stat=s)),
        st.tuples(BUFFER, STAT).map(lambda a: OpResult(OpCode.GET_DATA, 0, data=a[0], stat=a[1])),
        st.lists(USTRING, max_size=4).map(lambda c: OpResult(OpCode.GET_CHILDREN, 0, children=c)),
        st.sampled_from([OpCode.DELETE, OpCode.CHECK]).map(lambda t: OpResult(t, 0)),
        err_codes.map(lambda e: OpResult(OpCode.ERROR, e)),
    )


@settings(max_examples=500)
@given(st.lists(result_strategy(), max_size=6))
def test_multi_response_round_trips(results: list[OpResult]) -> None:
    out = bytearray()
    write_multi_response(out, results)
    back, end = read_multi_response(bytes(out), 0)
    assert back == results
    assert end == len(out)
    again = bytearray()
    write_multi_response(again, back)
    assert again == out


def test_multi_response_layout() -> None:
    """An error result: header (-1, false, err) then ErrorResponse(err); delete has no record."""
    out = bytearray()
    write_multi_response(out, [OpResult(OpCode.DELETE, 0), OpResult(OpCode.ERROR, -101)])
    assert bytes(out) == bytes.fromhex(
        "00000002 00 00000000" "ffffffff 00 ffffff9b ffffff9b" "ffffffff 01 ffffffff")


def test_multi_response_with_an_unknown_result_type_is_a_protocol_error() -> None:
    data = MultiHeader(OpCode.SYNC, False, 0).to_bytes() + MultiHeader(-1, True, -1).to_bytes()
    with pytest.raises(ProtocolError):
        read_multi_response(data, 0)
