"""The framing between a ParserSession and its parser child: what passes, and what a
hostile child's bytes cannot make the parent accept."""

from __future__ import annotations

import io
import json

import pytest

from worker.files import protocol
from worker.files.protocol import Frame, FrameDecoder, FrameLimits, ProtocolError

LIMITS = FrameLimits(max_header=1 << 10, max_payload=1 << 12)


def raw(header: bytes, payload: bytes = b"") -> bytes:
    return len(header).to_bytes(4, "big") + header + payload


def test_a_frame_round_trips_whole_and_byte_by_byte() -> None:
    data = (protocol.encode({"type": "result", "value": {"name": "é"}}, b"\x00payload")
            + protocol.encode({"type": "read", "offset": 5, "length": 7}))
    whole = FrameDecoder(LIMITS)
    whole.feed(data)
    assert whole.next() == Frame({"type": "result", "value": {"name": "é"}, "bytes": 8},
                                 b"\x00payload")
    assert whole.next() == Frame({"type": "read", "offset": 5, "length": 7, "bytes": 0})
    assert whole.next() is None

    trickled = FrameDecoder(LIMITS)
    frames = []
    for byte in data:
        trickled.feed(bytes([byte]))
        if (frame := trickled.next()) is not None:
            frames.append(frame.type)
    assert frames == ["result", "read"]
    assert trickled.buffered == 0


def test_a_blocking_stream_gives_its_frames_then_none() -> None:
    stream = io.BytesIO(protocol.encode({"type": "call", "op": "stat"}, b"ab"))
    assert protocol.read_frame(stream, LIMITS) == Frame(
        {"type": "call", "op": "stat", "bytes": 2}, b"ab")
    assert protocol.read_frame(stream, LIMITS) is None


def test_a_stream_ending_inside_a_frame_is_refused() -> None:
    with pytest.raises(ProtocolError, match="ended"):
        protocol.read_frame(io.BytesIO(protocol.encode({"type": "data"}, b"abc")[:-1]), LIMITS)


@pytest.mark.parametrize(("data", "reason"), [
    (b"\xff\xff\xff\xff", "header of 4294967295 bytes"),
    (raw(b"x" * 2000), "header of 2000 bytes"),
    (raw(b"not json"), "not JSON"),
    (raw(b"[1, 2]"), "not a JSON object"),
    (raw(b'{"bytes": -1}'), "not a count"),
    (raw(b'{"bytes": "12"}'), "not a count"),
    (raw(b'{"bytes": true}'), "not a count"),
    (raw(b'{"bytes": 3000000000}'), "payload of 3000000000 bytes"),
])
def test_a_frame_past_the_limits_is_refused_before_its_bytes_are_awaited(
        data: bytes, reason: str) -> None:
    decoder = FrameDecoder(LIMITS)
    decoder.feed(data)
    with pytest.raises(ProtocolError, match=reason):
        decoder.next()
    with pytest.raises(ProtocolError, match=reason):
        protocol.read_frame(io.BytesIO(data), LIMITS)


def test_a_header_nested_past_the_parsers_recursion_is_refused() -> None:
    decoder = FrameDecoder(FrameLimits(max_header=1 << 20, max_payload=0))
    decoder.feed(raw(b"[" * 100_000 + b"]" * 100_000))
    with pytest.raises(ProtocolError, match="not JSON"):
        decoder.next()


def test_the_header_says_the_payload_length_whatever_the_caller_put_there() -> None:
    frame = protocol.encode({"type": "data", "bytes": 99}, b"abc")
    assert json.loads(frame[4:-3]) == {"type": "data", "bytes": 3}


def test_an_error_message_is_one_short_line() -> None:
    assert protocol.message_of(ValueError("a\n  b\tc")) == "a b c"
    assert protocol.message_of(KeyError()) == "KeyError"
    assert len(protocol.message_of(ValueError("x" * 10_000))) == protocol.MAX_MESSAGE_CHARS
