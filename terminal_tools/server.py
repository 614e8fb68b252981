"""Build the FastMCP application: tools, categories, lifespan. Nothing else."""

from __future__ import annotations

import dataclasses
import json
import sys
import weakref
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from fastmcp import Context, FastMCP
from fastmcp.server.lifespan import lifespan
from fastmcp.skills.provider import SkillsDirectoryProvider

from . import __version__
from .config import Settings
from .core.runtime import Runtime
from .tools import register_all
from .tools.job_events import JobEvents
from .tools.job_events import register as register_job_events
from .tools.middleware import ArgumentErrors, InFlight, Scoping, quiet_refusals
from .tools.notices import EndedJobsMiddleware
from .tools.tasks import JobTasks

INSTRUCTIONS = """\
A terminal for agents. terminal_exec runs a command and waits (read semantic_status
first); a command that outlives auto_background_after_sec becomes a background job
whose output you follow with terminal_job_logs by byte offset. Output that does not fit
inline is available through output_handle and terminal_output_get. terminal_rg and
terminal_glob search files. Advanced tools: terminal_job_start and the terminal_pty_*
tools (persistent interactive bash).
"""

CATEGORIES = ("basic", "advanced")

# Runtimes of servers currently running in this process (signal handlers end them).
ACTIVE_RUNTIMES: set[Runtime] = set()

# The request counter of each server built here (see in_flight).
_IN_FLIGHT: weakref.WeakKeyDictionary[FastMCP, InFlight] = weakref.WeakKeyDictionary()

# The job-event fan-out of each server built here (resources, subscriptions, logs).
JOB_EVENTS: weakref.WeakKeyDictionary[FastMCP, JobEvents] = weakref.WeakKeyDictionary()


def build_server(settings: Settings | None = None, *, auth: Any = None) -> FastMCP:
    settings = settings or Settings()
    events = JobEvents(settings.share_across_sessions)
    tasks = JobTasks(events, settings.share_across_sessions)
    events.task_visible = tasks.visible_task

    @lifespan
    async def runtime_lifespan(server: FastMCP) -> AsyncIterator[dict[str, Any]]:
        runtime = Runtime(settings)
        ACTIVE_RUNTIMES.add(runtime)
        await runtime.start()
        events.attach(runtime)
        tasks.attach(runtime)
        try:
            yield {"runtime": runtime}
        finally:
            ACTIVE_RUNTIMES.discard(runtime)
            tasks.detach()
            await events.close()
            await runtime.close()

    mcp = FastMCP(
        "terminal-tools",
        instructions=INSTRUCTIONS,
        version=__version__,
        lifespan=runtime_lifespan,
        auth=auth,
    )
    _IN_FLIGHT[mcp] = InFlight()
    mcp.add_middleware(_IN_FLIGHT[mcp])
    mcp.add_middleware(Scoping(settings))
    mcp.add_middleware(ArgumentErrors())
    mcp.add_middleware(EndedJobsMiddleware())
    JOB_EVENTS[mcp] = events
    register_job_events(mcp, events)
    mcp.add_extension(tasks)
    quiet_refusals()
    register_all(mcp)
    _register_server_info(mcp, settings)
    root = skills_root()
    if root is not None:
        mcp.add_provider(SkillsDirectoryProvider(root))
    if settings.tools != "all":
        hidden = {c for c in CATEGORIES if c != settings.tools}
        mcp.disable(tags=hidden)
    return mcp


def in_flight(mcp: FastMCP) -> InFlight:
    """The counter of requests being served by a server from build_server."""
    return _IN_FLIGHT[mcp]


def skills_root() -> Path | None:
    """The skill folders: in a source checkout ``skills/`` beside the package; in an
    installed wheel, the copy bundled as ``terminal_tools/bundled_skills``."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "skills", here / "bundled_skills"):
        if candidate.is_dir() and any(candidate.glob("*/SKILL.md")):
            return candidate
    return None


def _register_server_info(mcp: FastMCP, settings: Settings) -> None:
    @mcp.resource(
        "terminal://server-info",
        name="server-info",
        description="What this server runs with: version, shells, search engine, PATH "
        "source, categories and every limit.",
        mime_type="application/json",
    )
    async def server_info(ctx: Context) -> str:
        from .tools.context import default_workdir

        runtime = ctx.lifespan_context.get("runtime")
        info = describe(settings, runtime)
        if runtime is not None:
            # The directory the tools use for this client (its first root, when it offers
            # one): the same function the tools call, so the two cannot disagree.
            info["default_workdir"] = await default_workdir(ctx)
        return json.dumps(info, indent=2)


def describe(settings: Settings, runtime: Runtime | None) -> dict[str, Any]:
    from .core.shell import ShellError, resolve_shell
    from .tools import PTY_SUPPORTED

    try:
        shell = resolve_shell()
        default_shell: dict[str, Any] = {"kind": shell.kind, "path": shell.path}
    except ShellError as exc:
        default_shell = {"error": str(exc)}
    info: dict[str, Any] = {
        "name": "terminal-tools",
        "version": __version__,
        "platform": sys.platform,
        "categories": list(CATEGORIES) if settings.tools == "all" else [settings.tools],
        "pty_supported": PTY_SUPPORTED,
        "default_shell": default_shell,
        "settings": dataclasses.asdict(settings) | {"token": "***" if settings.token else None},
    }
    if runtime is not None:
        info.update(
            {
                "instance": runtime.instance,
                "user_shell": runtime.user_shell,
                "path_source": runtime.path_source,
                "search_engine": "python"
                if runtime.ripgrep is None or settings.search_engine == "python"
                else "ripgrep",
                "ripgrep": runtime.ripgrep,
                "children_rg": runtime.children_rg,
                "running_jobs": len(runtime.jobs.running),
                "policy": runtime.policy.summary(),
                "audit_log": settings.audit_log,
                "redacted_variables": runtime.redactor.names,
                "watchdog_pid": runtime.registry.watchdog_pid,
                "watchdog_restarts": runtime.registry.watchdog_restarts,
                "watchdog_error": runtime.registry.watchdog_error,
                "containment": {
                    "kind": runtime.registry.containment.kind,
                    "detail": runtime.registry.containment.detail,
                },
            }
        )
    return info


def kill_everything_now() -> None:
    for runtime in list(ACTIVE_RUNTIMES):
        runtime.kill_all_now()
