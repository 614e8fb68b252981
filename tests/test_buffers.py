"""Byte windows, spools, UTF-8-safe paging and the output store (property-based)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from terminal_tools.core.buffers import SpoolBudget, StreamBuffer, decode_page, utf8_cut
from terminal_tools.core.inline import InlineCapture
from terminal_tools.core.noise import NoiseFilter, clean
from terminal_tools.core.store import OutputStore


@settings(max_examples=150, deadline=None)
@given(chunks=st.lists(st.binary(min_size=0, max_size=300), max_size=40),
       window=st.integers(1, 500), spool=st.integers(0, 4000),
       reads=st.lists(st.tuples(st.integers(0, 13000), st.integers(1, 700)), max_size=10))
def test_stream_buffer_reads_are_exact_or_count_the_gap(chunks: list[bytes], window: int,
                                                        spool: int,
                                                        reads: list[tuple[int, int]]) -> None:
    budget = SpoolBudget(10**9)
    buffer = StreamBuffer(window, spool, budget)
    whole = b""
    for chunk in chunks:
        buffer.append(chunk)
        whole += chunk
    buffer.close()
    assert buffer.total == len(whole)
    for offset, size in reads:
        chunk = buffer.read(offset, size)
        start = min(offset, len(whole))
        assert chunk.offset == start + chunk.dropped
        assert chunk.data == whole[chunk.offset:chunk.offset + len(chunk.data)]
        if chunk.dropped == 0 and chunk.offset < len(whole):
            assert len(chunk.data) > 0
    assert buffer.dropped_bytes == max(0, len(whole) - buffer.retained_bytes)
    buffer.release()
    assert budget.used == 0


@settings(max_examples=150, deadline=None)
@given(chunks=st.lists(st.binary(min_size=1, max_size=300), max_size=40),
       window=st.integers(1, 500))
def test_memory_window_keeps_exactly_the_last_window_bytes(chunks: list[bytes],
                                                           window: int) -> None:
    buffer = StreamBuffer(window, 0)  # no spool: memory alone
    whole = b""
    for chunk in chunks:
        buffer.append(chunk)
        whole += chunk
        kept = buffer.read(0, len(whole))
        assert kept.offset == kept.dropped == max(0, len(whole) - window)
        assert kept.data == whole[kept.offset:]


@settings(max_examples=150, deadline=None)
@given(text=st.text(min_size=1, max_size=200), page=st.integers(1, 9))
def test_paging_never_splits_a_character(text: str, page: int) -> None:
    data = text.encode()
    pieces = []
    offset = 0
    while offset < len(data):
        chunk = data[offset:offset + page]
        at_eof = offset + len(chunk) >= len(data)
        _, used = decode_page(chunk, at_eof)
        assert used > 0
        pieces.append(data[offset:offset + used])
        offset += used
    assert b"".join(pieces) == data
    for piece in pieces:
        if len(piece) >= 4:
            piece.decode("utf-8")  # whole characters only


def test_utf8_cut_examples() -> None:
    euro = "€".encode()
    assert utf8_cut(b"ab" + euro[:2], at_eof=False) == 2
    assert utf8_cut(b"ab" + euro, at_eof=False) == 5
    assert utf8_cut(b"ab" + euro[:2], at_eof=True) == 4


def test_spool_budget_is_shared_and_exact() -> None:
    budget = SpoolBudget(1000)
    one, two = StreamBuffer(10, 10**6, budget), StreamBuffer(10, 10**6, budget)
    for _ in range(80):
        one.append(b"x" * 10)
    for _ in range(80):
        two.append(b"y" * 10)
    assert budget.used == 1000
    assert two.read(0, 10**6).data == b"y" * 200  # what the budget allowed on disk
    assert two.dropped_bytes == 800 - 200 - 10  # the rest, but for the memory window
    one.release()
    assert budget.used == 200


def test_store_evicts_least_recently_used_and_expires() -> None:
    now = [0.0]
    store = OutputStore(max_bytes=100, ttl_sec=10, clock=lambda: now[0])

    def entry(size: int) -> dict[str, StreamBuffer]:
        buffer = StreamBuffer(10**6, 0)
        buffer.append(b"x" * size)
        return {"stdout": buffer}

    a = store.put(entry(40))
    b = store.put(entry(40))
    assert store.get(a) is not None  # a becomes most recent
    c = store.put(entry(40))  # evicts b, the least recently used
    assert store.get(b) is None and store.get(a) is not None and store.get(c) is not None
    assert store.bytes_used == 80
    now[0] = 5
    store.get(c)
    now[0] = 12  # a was last used at 0 -> expired; c at 5 -> alive
    assert store.get(a) is None and store.get(c) is not None
    big = store.put(entry(500))  # larger than the cap: kept alone
    assert store.get(big) is not None and len(store) == 1


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 60), max_size=30))
def test_store_never_exceeds_its_cap_with_ordinary_entries(sizes: list[int]) -> None:
    store = OutputStore(max_bytes=100, ttl_sec=100)
    for size in sizes:
        buffer = StreamBuffer(10**6, 0)
        buffer.append(b"x" * size)
        store.put({"stdout": buffer})
        assert store.bytes_used <= 100


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=50), max_size=30))
def test_streaming_noise_filter_equals_whole_text_cleaning(chunks: list[bytes]) -> None:
    stream = NoiseFilter()
    out = b"".join(stream.feed(c) for c in chunks) + stream.flush()
    assert out == clean(b"".join(chunks))


def test_inline_capture_keeps_head_and_tail() -> None:
    capture = InlineCapture(300, clean=True)
    for i in range(1000):
        capture.feed(f"line {i}\n".encode())
    capture.finish()
    text = capture.render("[{omitted} omitted]")
    assert text.text.startswith("line 0\n") and text.text.endswith("line 999\n")
    assert text.omitted_bytes == capture.total - text.shown_bytes
