"""terminal_rg and terminal_glob: one behaviour table, run against both engines."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import psutil
import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from .conftest import call, call_error, make_client, stdio_transport

pytestmark = pytest.mark.anyio

FILES: dict[str, bytes] = {
    ".gitignore": b"*.log\nbuild/\n",
    "app.py": b"def main():\n    print('Hello')\n\nTODO fix\n",
    "src/util.py": b"import os\nHELLO = 1\nhello = 2\nhello = 3\n",
    "src/.gitignore": b"secret*.txt\n!secret_ok.txt\n",
    "src/secret1.txt": b"hello secret\n",
    "src/secret_ok.txt": b"hello ok\n",
    "notes.md": b"hello markdown\n",
    "debug.log": b"hello log\n",
    "build/out.py": b"hello build\n",
    ".hidden/h.txt": b"hello hidden\n",
    "deep/a/b/c.txt": b"hello deep\n",
    "bin.dat": b"hello\x00binary\x00data",
    "multi.txt": b"start\nfoo\nbar\nend\n",
    "literal.txt": b"a.b here\naxb there\n",
    "minified.js": b"var x=1;" * 2000 + b"needle" + b"var y=2;" * 2000 + b"\n",
}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    for name, content in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return root


@pytest.fixture(params=["ripgrep", "python"])
async def engine_client(request: pytest.FixtureRequest, tree: Path):
    async with make_client(search_engine=request.param, workdir=str(tree)) as c:
        c.engine = request.param  # type: ignore[attr-defined]
        yield c


async def rg(client: Client, **arguments) -> dict:
    result = await call(client, "terminal_rg", **arguments)
    assert result["engine"] == client.engine  # type: ignore[attr-defined]
    return result


def found(result: dict) -> set[tuple[str, int]]:
    return {(m["path"], m["line"]) for m in result["matches"]}


def paths(result: dict) -> set[str]:
    return {m["path"] for m in result["matches"]}


async def test_default_search_respects_ignores_hidden_and_binary(engine_client: Client) -> None:
    result = await rg(engine_client, pattern="hello")
    assert paths(result) == {"src/util.py", "src/secret_ok.txt", "notes.md", "deep/a/b/c.txt"}
    assert result["truncated"] is None
    assert result["files_matched"] == 4


async def test_ignore_case(engine_client: Client) -> None:
    result = await rg(engine_client, pattern="hello", ignore_case=True, glob=["*.py"])
    assert found(result) == {
        ("app.py", 2),
        ("src/util.py", 2),
        ("src/util.py", 3),
        ("src/util.py", 4),
    }


async def test_glob_exclusion(engine_client: Client) -> None:
    result = await rg(engine_client, pattern="hello", glob=["!*.txt"])
    assert paths(result) == {"src/util.py", "notes.md"}


async def test_type_filter(engine_client: Client) -> None:
    result = await rg(engine_client, pattern="hello", type_filter="md")
    assert paths(result) == {"notes.md"}


async def test_context_lines_are_grouped_with_their_match(engine_client: Client) -> None:
    result = await rg(engine_client, pattern="foo", context=1, path="multi.txt")
    assert result["matches"] == [
        {"path": "multi.txt", "line": 2, "text": "foo", "before": ["start"], "after": ["bar"]}
    ]


async def test_without_context_a_match_is_path_line_and_text(engine_client: Client) -> None:
    result = await engine_client.call_tool(
        "terminal_rg", {"pattern": "foo", "path": "multi.txt"}, raise_on_error=False
    )
    assert result.structured_content["matches"] == [{"path": "multi.txt", "line": 2, "text": "foo"}]
    # The text block carries the same result, for clients that read only text.
    assert json.loads(result.content[0].text) == result.structured_content


async def test_max_count_per_file(engine_client: Client) -> None:
    result = await rg(engine_client, pattern="hello", path="src/util.py", max_count=1)
    assert found(result) == {("util.py", 3)}


async def test_max_depth(engine_client: Client) -> None:
    shallow = await rg(engine_client, pattern="deep", max_depth=2)
    assert shallow["matches"] == []
    deep = await rg(engine_client, pattern="deep", max_depth=4)
    assert paths(deep) == {"deep/a/b/c.txt"}


async def test_hidden(engine_client: Client) -> None:
    result = await rg(engine_client, pattern="hidden", hidden=True)
    assert paths(result) == {".hidden/h.txt"}


async def test_no_ignore_against_nested_gitignore_with_negation(engine_client: Client) -> None:
    honoured = await rg(engine_client, pattern="hello", path="src")
    assert paths(honoured) == {"util.py", "secret_ok.txt"}
    ignored = await rg(engine_client, pattern="hello", no_ignore=True)
    assert {"src/secret1.txt", "debug.log", "build/out.py"} <= paths(ignored)


async def test_fixed_strings(engine_client: Client) -> None:
    regex = await rg(engine_client, pattern="a.b", path="literal.txt")
    assert len(regex["matches"]) == 2
    literal = await rg(engine_client, pattern="a.b", path="literal.txt", fixed_strings=True)
    assert found(literal) == {("literal.txt", 1)}


async def test_multiline(engine_client: Client) -> None:
    assert (await rg(engine_client, pattern="foo\\nbar"))["matches"] == []
    result = await rg(engine_client, pattern="foo\\nbar", multiline=True)
    assert found(result) == {("multi.txt", 2), ("multi.txt", 3)}


async def test_files_with_matches(engine_client: Client) -> None:
    result = await rg(engine_client, pattern="hello", files_with_matches=True)
    assert set(result["files"]) == {
        "src/util.py",
        "src/secret_ok.txt",
        "notes.md",
        "deep/a/b/c.txt",
    }
    assert result["matches"] == []


async def test_caps_are_reported(engine_client: Client) -> None:
    result = await rg(engine_client, pattern="hello", max_results=2, no_ignore=True)
    assert len(result["matches"]) == 2 and result["truncated"] == "max_results"


@pytest.mark.parametrize("engine", ["ripgrep", "python"])
async def test_byte_cap_stops_a_wide_search(engine: str, tmp_path: Path) -> None:
    for index in range(200):
        (tmp_path / f"f{index:03}.txt").write_text(f"needle {'x' * 60} {index}\n")
    async with make_client(search_engine=engine, inline_max_kb=4) as c:
        result = await call(c, "terminal_rg", pattern="needle", path=str(tmp_path))
    assert result["truncated"] == "max_bytes" and result["files_searched"] is None
    sent = sum(len(m["text"]) + len(m["path"]) for m in result["matches"])
    assert 0 < len(result["matches"]) < 200 and sent <= 4 * 1024


async def test_long_lines_are_clipped_around_the_match(engine_client: Client) -> None:
    result = await rg(engine_client, pattern="needle")
    text = result["matches"][0]["text"]
    assert "needle" in text and len(text) < 600 and "chars]" in text


async def test_invalid_regex_is_a_clear_error(engine_client: Client) -> None:
    error = await call_error(engine_client, "terminal_rg", pattern="(unclosed")
    assert "regex" in error.lower()


async def test_missing_path_is_a_clear_error(engine_client: Client) -> None:
    error = await call_error(engine_client, "terminal_rg", pattern="x", path="nope/nothing")
    assert "does not exist" in error


async def test_unknown_type_is_a_clear_error(engine_client: Client) -> None:
    error = await call_error(engine_client, "terminal_rg", pattern="x", type_filter="no-such-type")
    assert "type" in error.lower()


async def test_binary_files_are_skipped(engine_client: Client) -> None:
    result = await rg(engine_client, pattern="binary")
    assert "bin.dat" not in paths(result)


def _unprivileged_server(engine: str) -> StdioTransport:
    """The server over stdio, unable to read what its permissions deny. Root (as in CI)
    reads everything, so it is started without the capabilities that allow that."""
    launcher = None
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root and util-linux setpriv is not installed")
        launcher = [setpriv, "--bounding-set=-dac_override,-dac_read_search"]
    return stdio_transport(env={"TERMINAL_TOOLS_SEARCH_ENGINE": engine}, launcher=launcher)


@pytest.mark.parametrize("engine", ["ripgrep", "python"])
async def test_unreadable_subtree_is_counted_not_fatal(engine: str, tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "inside.txt").write_text("hello\n")
    (tmp_path / "ok.txt").write_text("hello\n")
    locked.chmod(0)
    try:
        async with Client(_unprivileged_server(engine)) as c:
            result = await call(c, "terminal_rg", pattern="hello", path=str(tmp_path))
        assert result["engine"] == engine
        assert [m["path"] for m in result["matches"]] == ["ok.txt"]
        assert result["truncated"] is None
        assert result["errors_count"] == 1
        assert result["errors"] == ["locked: Permission denied"]
    finally:
        locked.chmod(0o755)


async def test_ripgrep_past_the_time_limit_returns_what_it_has(tmp_path: Path) -> None:
    fifo = tmp_path / "never-written"
    os.mkfifo(fifo)  # rg blocks reading a FIFO it is pointed at
    async with make_client(search_engine="ripgrep", search_timeout_sec=1.0) as c:
        started = time.monotonic()
        result = await call(c, "terminal_rg", pattern="x", path=str(fifo))
        assert time.monotonic() - started < 10
        assert result["truncated"] == "timeout" and result["files_searched"] is None
        assert not [
            child
            for child in psutil.Process().children(recursive=True)
            if "never-written" in " ".join(child.cmdline())
        ], "the stuck rg was left running"
        # The server still searches after killing the stuck rg.
        (tmp_path / "a.txt").write_text("x\n")
        again = await call(c, "terminal_rg", pattern="x", path=str(tmp_path / "a.txt"))
        assert again["matches"] == [{"path": "a.txt", "line": 1, "text": "x"}]


async def test_python_engine_past_the_time_limit_returns_partial_results(tmp_path: Path) -> None:
    for index in range(3000):
        (tmp_path / f"f{index:04}.txt").write_text("needle\n")
    async with make_client(search_engine="python", search_timeout_sec=0.05) as c:
        result = await call(c, "terminal_rg", pattern="needle", path=str(tmp_path), max_results=5000)
    assert result["truncated"] == "timeout" and result["files_searched"] is None
    assert len(result["matches"]) < 3000
    assert all(m["text"] == "needle" for m in result["matches"])


async def test_pathological_regex_is_bounded_in_the_python_engine(tmp_path: Path) -> None:
    (tmp_path / "evil.txt").write_text("a" * 5000 + "b\n")
    async with make_client(search_engine="python", regex_timeout_sec=0.5) as c:
        started = time.monotonic()
        result = await call(c, "terminal_rg", pattern="(a|aa)+$", path=str(tmp_path))
        assert time.monotonic() - started < 10
        assert result["matches"] == []


# Names and lines that exercise every way rg's JSON can spell a path or a line: quotes,
# backslashes, control characters, CRLF, a literal backslash-n at the end of a file,
# non-ASCII text, and a name and a line that are not UTF-8 (sent by rg as base64).
TRICKY: dict[bytes, bytes] = {
    b'quote"and\\back.txt': b"needle one\n",
    b"plain.txt": (
        b'needle "quoted" \\ back\n'
        b"tab\tneedle\n"
        b"uni \xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac needle\n"
        b"needle crlf\r\n"
        b"\x1b[31mneedle\x1b[0m\n"
        b"a\nneedle in context\nb\n"
        b"ends with needle\\n"
    ),
    b"lat\xe9.txt": b"needle latin\n",
    b"bytes.txt": b"needle \xff\xfe bad\n",
}


@pytest.mark.parametrize("context", [0, 1])
async def test_engines_agree_on_tricky_names_and_lines(tmp_path: Path, context: int) -> None:
    for name, content in TRICKY.items():
        (tmp_path / os.fsdecode(name)).write_bytes(content)
    results = {}
    for engine in ("ripgrep", "python"):
        async with make_client(search_engine=engine, workdir=str(tmp_path)) as c:
            result = await call(c, "terminal_rg", pattern="needle", context=context)
            results[engine] = result["matches"]
    # Same matches in the same order: by path, then line, whatever rg's parallel walk did.
    assert results["ripgrep"] == results["python"]
    places = [(m["path"], m["line"]) for m in results["ripgrep"]]
    assert places == sorted(places)
    by_place = {(m["path"], m["line"]): m["text"] for m in results["ripgrep"]}
    assert by_place[('quote"and\\back.txt', 1)] == "needle one"
    assert by_place[("plain.txt", 1)] == 'needle "quoted" \\ back'
    assert by_place[("plain.txt", 3)] == "uni \u00e9 \u65e5\u672c needle"
    assert by_place[("plain.txt", 4)] == "needle crlf"
    assert by_place[("plain.txt", 5)] == "\x1b[31mneedle\x1b[0m"
    assert by_place[("plain.txt", 9)] == "ends with needle\\n"
    assert by_place[("lat\\xe9.txt", 1)] == "needle latin"
    assert by_place[("bytes.txt", 1)] == "needle \ufffd\ufffd bad"
    if context:
        lead = next(m for m in results["ripgrep"] if m["line"] == 7)
        assert lead["before"] == ["a"] and lead["after"] == ["b"]


# -- glob ----------------------------------------------------------------------------------


async def glob(client: Client, **arguments) -> dict:
    result = await call(client, "terminal_glob", **arguments)
    assert result["engine"] == client.engine  # type: ignore[attr-defined]
    return result


async def test_glob_bare_stem_widens(engine_client: Client) -> None:
    result = await glob(engine_client, pattern="util")
    assert result["expanded_pattern"] == "**/*util*" and result["paths"] == ["src/util.py"]


async def test_glob_without_slash_is_recursive(engine_client: Client) -> None:
    result = await glob(engine_client, pattern="*.py", sort="path")
    assert result["paths"] == ["app.py", "src/util.py"]
    assert result["expanded_pattern"] == "**/*.py"


async def test_glob_explicit_path_pattern(engine_client: Client) -> None:
    # As with terminal_rg globs (ripgrep's rule), the pattern re-includes files an
    # ignore file excludes by name; ignored directories stay pruned.
    result = await glob(engine_client, pattern="src/*.txt", sort="path")
    assert result["paths"] == ["src/secret1.txt", "src/secret_ok.txt"]
    result = await glob(engine_client, pattern="*.py", sort="path")
    assert "build/out.py" not in result["paths"]


async def test_glob_include_ignored(engine_client: Client) -> None:
    result = await glob(engine_client, pattern="*.py", include_ignored=True, sort="path")
    assert result["paths"] == ["app.py", "build/out.py", "src/util.py"]


async def test_glob_sorts_by_mtime_and_caps(engine_client: Client, tree: Path) -> None:
    now = time.time()
    os.utime(tree / "app.py", (now - 100, now - 100))
    os.utime(tree / "src/util.py", (now, now))
    result = await glob(engine_client, pattern="*.py", max_results=1)
    assert result["paths"] == ["src/util.py"]
    assert result["count"] == 2 and result["truncated"] == "max_results"


async def test_glob_missing_path(engine_client: Client) -> None:
    error = await call_error(engine_client, "terminal_glob", pattern="*", path="nope")
    assert "does not exist" in error


async def test_explicit_include_glob_reaches_an_ignored_file(engine_client: Client) -> None:
    # As in ripgrep: an include glob re-includes files an ignore file excludes (but not
    # files inside ignored directories).
    result = await rg(engine_client, pattern="hello", glob=["secret*.txt"])
    assert paths(result) == {"src/secret1.txt", "src/secret_ok.txt"}
