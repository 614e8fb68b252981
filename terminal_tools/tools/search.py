"""MCP adapters for ``terminal_rg`` and ``terminal_glob``."""

from __future__ import annotations

import asyncio
import os
from typing import Annotated, Literal

from fastmcp import Context, FastMCP
from fastmcp.tools import ToolResult
from pydantic import Field

from ..core.rgflags import apply_extra_args
from ..core.runtime import Runtime
from ..core.search import SearchRequest, glob_files, search_python, search_ripgrep
from ..errors import InvalidInput, NotFound, UserError
from ..models import GlobResult, SearchResult
from .context import default_workdir, runtime_of
from .replies import reply_to
from .results import output_schema_of, payload_of, structured

READ_ONLY = {
    "readOnlyHint": True,
    "destructiveHint": False,
    "idempotentHint": True,
    "openWorldHint": False,
}


def _root(path: str, default: str) -> str:
    if "\0" in path:
        raise InvalidInput("path contains a NUL byte")
    root = os.path.normpath(os.path.join(default, os.path.expanduser(path)))
    if not os.path.exists(root):
        raise NotFound(f"path does not exist: {root}")
    return root


def _engine(runtime: Runtime) -> str | None:
    """The rg binary to use, or None for the Python engine."""
    choice = runtime.settings.search_engine
    if choice == "python":
        return None
    rg = runtime.ripgrep
    if rg is None and choice == "ripgrep":
        raise NotFound("search_engine is 'ripgrep' but no rg binary was found")
    return rg


def register(mcp: FastMCP) -> None:
    @mcp.tool(
        tags={"basic"},
        title="Search file contents",
        annotations=READ_ONLY,
        output_schema=output_schema_of(SearchResult),
    )
    async def terminal_rg(
        pattern: Annotated[
            str,
            Field(
                min_length=1,
                description=(
                    "Regular expression (Rust regex syntax with ripgrep; Python `regex` syntax "
                    "with the fallback engine), or a literal with fixed_strings."
                ),
            ),
        ],
        ctx: Context,
        path: Annotated[
            str,
            Field(
                description=(
                    "Directory or file to search, relative to the default working directory."
                )
            ),
        ] = ".",
        glob: Annotated[
            str | list[str] | None,
            Field(
                description=(
                    "Include glob like '*.py', or a list of them (no slash: matches the name "
                    "anywhere); prefix with ! to exclude."
                )
            ),
        ] = None,
        type_filter: Annotated[
            str | None, Field(description=("File type, e.g. py, js, ts, rust, go, md."))
        ] = None,
        ignore_case: Annotated[bool, Field(description="Case-insensitive.")] = False,
        context: Annotated[
            int, Field(ge=0, le=20, description=("Lines of context before and after each match."))
        ] = 0,
        max_count: Annotated[
            int | None, Field(ge=1, description=("At most this many matches per file."))
        ] = None,
        max_depth: Annotated[
            int | None, Field(ge=0, description=("Descend at most this many directory levels."))
        ] = None,
        hidden: Annotated[bool, Field(description="Search hidden files and folders.")] = False,
        no_ignore: Annotated[
            bool, Field(description=("Do not honour .gitignore / .ignore / .rgignore."))
        ] = False,
        fixed_strings: Annotated[
            bool, Field(description=("Treat pattern as a literal string."))
        ] = False,
        multiline: Annotated[
            bool, Field(description=("Let matches span lines ('.' matches newlines too)."))
        ] = False,
        files_with_matches: Annotated[
            bool, Field(description=("Return only the paths of files with a match."))
        ] = False,
        max_results: Annotated[
            int | None,
            Field(
                ge=1,
                le=10000,
                description=(
                    "Most matches (or files) returned. Default: the search_max_results setting "
                    "(500)."
                ),
            ),
        ] = None,
        extra_args: Annotated[
            list[str] | None,
            Field(
                description=(
                    "ripgrep flags, read as the parameters they mean: -i -s -F -w -U/--multiline "
                    "-l -c (adds counts) -. -u -uu -g X -t X -m N -d N -C N; -n -H are no-ops. "
                    "Others are refused: run rg through terminal_exec for those."
                )
            ),
        ] = None,
    ) -> ToolResult:
        """Search file contents with ripgrep (structured matches, stops early at caps).

        Respects .gitignore and skips hidden and binary files unless told otherwise.
        Read `truncated`: null means the result is complete.
        """
        runtime = runtime_of(ctx)
        settings = runtime.settings
        try:
            root = _root(path, await default_workdir(ctx))
            request = SearchRequest(
                pattern=pattern,
                root=root,
                globs=(glob,) if isinstance(glob, str) else tuple(glob or ()),
                type_filter=type_filter,
                ignore_case=ignore_case,
                context=context,
                max_count=max_count,
                max_depth=max_depth,
                hidden=hidden,
                no_ignore=no_ignore,
                fixed_strings=fixed_strings,
                multiline=multiline,
                files_with_matches=files_with_matches,
                max_results=max_results or settings.search_max_results,
                max_bytes=settings.inline_max_kb * 1024,
                timeout_sec=settings.search_timeout_sec,
                regex_timeout_sec=settings.regex_timeout_sec,
            )
            request, flags = apply_extra_args(request, list(extra_args or ()))
            rg = _engine(runtime)
            if rg is not None:
                outcome = await search_ripgrep(rg, request, runtime.search_env())
            else:
                outcome = await asyncio.to_thread(search_python, request)
        except UserError as exc:
            reply_to(exc)
        counts = None
        if flags.count:
            tally: dict[str, int] = {}
            for match in outcome.matches:
                tally[match["path"]] = tally.get(match["path"], 0) + 1
            counts = [{"path": path, "count": n} for path, n in sorted(tally.items())]
        payload = payload_of(SearchResult, outcome, root=root, counts=counts, ended_jobs=[])
        # A file's content or name can hold a secret's value, like a command's output.
        return structured(runtime.redactor.mask_tree(payload))

    @mcp.tool(tags={"basic"}, title="Find files by name", annotations=READ_ONLY)
    async def terminal_glob(
        pattern: Annotated[
            str,
            Field(
                min_length=1,
                description=(
                    "Glob like '*.py' or 'src/**/test_*.py'; a bare word like 'config' finds "
                    "**/*config*; a pattern without '/' matches at any depth."
                ),
            ),
        ],
        ctx: Context,
        path: Annotated[str, Field(description="Directory to search.")] = ".",
        max_results: Annotated[
            int | None,
            Field(
                ge=1,
                le=100000,
                description=("Most paths returned. Default: the glob_max_results setting (1000)."),
            ),
        ] = None,
        include_ignored: Annotated[
            bool, Field(description=("Also list files that .gitignore ignores, and hidden files."))
        ] = False,
        sort: Annotated[
            Literal["mtime", "path"],
            Field(description=("mtime: most recently modified first; path: alphabetical.")),
        ] = "mtime",
    ) -> GlobResult:
        """Find files by name (ripgrep's file walker: fast, honours .gitignore)."""
        runtime = runtime_of(ctx)
        try:
            root = _root(path, await default_workdir(ctx))
            if not os.path.isdir(root):
                raise InvalidInput(f"path is not a directory: {root}")
            outcome = await glob_files(
                _engine(runtime),
                pattern,
                root,
                max_results=max_results or runtime.settings.glob_max_results,
                include_ignored=include_ignored,
                sort=sort,
                timeout_sec=runtime.settings.search_timeout_sec,
                env=runtime.search_env(),
            )
        except UserError as exc:
            reply_to(exc)
        mask = runtime.redactor.mask_tree
        return GlobResult(
            paths=mask(outcome.files),
            count=outcome.total,
            truncated=outcome.truncated,
            timed_out=outcome.truncated == "timeout",
            expanded_pattern=mask(outcome.expanded),
            root=root,
            sort=sort,
            engine=outcome.engine,
            elapsed_ms=outcome.elapsed_ms,
        )
