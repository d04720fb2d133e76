"""The shared SSE parser: line endings, fields, comments, and a stream split at every byte."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app.providers.sse import SSEEvent, SSEParser

STREAM = (
    b": a comment, then an event with a name, an id and a retry\n"
    b"event: content_block_delta\nid: 7\nretry: 1500\n"
    b'data: {"type":"content_block_delta","delta":{"text":"h\xc3\xa9"}}\n\n'
    b"data: first line\ndata: second line\ndata:\n\n"
    b"data: [DONE]\n\n"
)
EXPECTED = [
    SSEEvent(
        "content_block_delta",
        '{"type":"content_block_delta","delta":{"text":"hé"}}',
        "7",
        1500,
    ),
    SSEEvent("message", "first line\nsecond line\n", "7", 1500),
    SSEEvent("message", "[DONE]", "7", 1500),
]


def parse(*pieces: bytes) -> list[SSEEvent]:
    parser = SSEParser()
    return [event for piece in pieces for event in parser.feed(piece)]


def test_a_whole_stream_gives_its_events() -> None:
    assert parse(STREAM) == EXPECTED


def test_every_two_way_split_gives_the_same_events() -> None:
    for cut in range(len(STREAM) + 1):
        assert parse(STREAM[:cut], STREAM[cut:]) == EXPECTED, cut


def test_one_byte_at_a_time_gives_the_same_events() -> None:
    assert parse(*(STREAM[i : i + 1] for i in range(len(STREAM)))) == EXPECTED


def test_crlf_and_cr_line_endings_read_as_lf_at_every_split() -> None:
    for ending in (b"\r\n", b"\r"):
        stream = STREAM.replace(b"\n", ending)
        for cut in range(len(stream) + 1):
            assert parse(stream[:cut], stream[cut:]) == EXPECTED, (ending, cut)


def test_a_crlf_split_between_its_cr_and_lf_ends_one_line_only() -> None:
    # "data: a\r" | "\n\r\n": had the LF counted as a line of its own, "a" would be sent early
    assert parse(b"data: a\r", b"\ndata: b\r", b"\n\r\n") == [SSEEvent("message", "a\nb")]


def test_comments_blank_data_and_unknown_fields() -> None:
    stream = b":keepalive\n\nfoo: bar\nnovalue\ndata\ndata:x\n\n"
    assert parse(stream) == [SSEEvent("message", "\nx")]


def test_bytes_that_are_not_utf8_read_as_replacement_characters() -> None:
    """As the event-stream rules decode a stream; raising dropped every event the same read
    had completed before the bad line, so what a run kept depended on how bytes were split."""
    stream = b"data: one\n\ndata: t\xffwo\nevent: \xc3\n\ndata: three\n\n"
    expected = [
        SSEEvent("message", "one"),
        SSEEvent("\ufffd", "t\ufffdwo"),
        SSEEvent("message", "three"),
    ]
    assert parse(stream) == expected
    for cut in range(len(stream) + 1):
        assert parse(stream[:cut], stream[cut:]) == expected, cut


def test_only_one_space_after_the_colon_is_dropped() -> None:
    assert parse(b"data:  two spaces\n\n") == [SSEEvent("message", " two spaces")]


def test_an_event_without_data_is_not_sent_and_its_name_is_forgotten() -> None:
    assert parse(b"event: ping\n\ndata: x\n\n") == [SSEEvent("message", "x")]


def test_bad_id_and_retry_values_are_ignored() -> None:
    stream = b"id: 1\nretry: 10\n\nid: a\x00b\nretry: soon\ndata: x\n\nid\ndata: y\n\n"
    assert parse(stream) == [SSEEvent("message", "x", "1", 10), SSEEvent("message", "y", "", 10)]


def test_an_event_cut_before_its_blank_line_is_dropped() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: done\n\ndata: half") == [SSEEvent("message", "done")]
    assert parser.feed(b"") == []


def test_a_line_split_across_many_feeds_is_joined() -> None:
    payload = b"data: " + b"x" * 5000 + b"\n\n"
    pieces = [payload[i : i + 7] for i in range(0, len(payload), 7)]
    assert parse(*pieces) == [SSEEvent("message", "x" * 5000)]


class _Piece(bytes):
    """A piece of a body that counts the bytes copied when it is appended to what came before
    (``before + piece`` calls its ``__radd__``, a subclass's reflected method winning)."""

    copied = 0

    def __radd__(self, before: bytes) -> bytes:
        _Piece.copied += len(before)
        return bytes(before) + bytes(self)


def test_a_long_line_in_many_pieces_is_joined_once_not_at_every_piece() -> None:
    # A provider's 1 MB event read 1 KB at a time: joining the line so far to every piece
    # copied it a thousand times (half a gigabyte; 20 MB took a minute and a half).
    payload = b"data: " + b"x" * 1_000_000 + b"\n\n"
    pieces = [_Piece(payload[i : i + 1024]) for i in range(0, len(payload), 1024)]
    _Piece.copied = 0
    assert parse(*pieces) == [SSEEvent("message", "x" * 1_000_000)]
    assert _Piece.copied <= len(payload)


_line = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n"),
    max_size=12,
)
_event = st.tuples(
    st.sampled_from(["", "message_start", "content_block_delta", "ping"]),
    st.lists(_line, min_size=1, max_size=3),
)


def _encode(events: list[tuple[str, list[str]]], ending: bytes) -> bytes:
    out = b""
    for name, lines in events:
        if name:
            out += b"event: " + name.encode() + ending
        out += b":comment" + ending
        out += b"".join(b"data: " + line.encode() + ending for line in lines)
        out += ending
    return out


@given(
    events=st.lists(_event, max_size=6),
    ending=st.sampled_from([b"\n", b"\r\n", b"\r"]),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_any_split_of_any_stream_gives_the_events_it_encodes(
    events: list[tuple[str, list[str]]], ending: bytes, cuts: list[int]
) -> None:
    stream = _encode(events, ending)
    points = sorted({min(c, len(stream)) for c in cuts})
    pieces = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    expected = [SSEEvent(name or "message", "\n".join(lines)) for name, lines in events]
    assert parse(*pieces) == expected
