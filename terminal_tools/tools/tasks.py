"""The MCP tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663), served from the
job manager.

A client that declares the extension on a 2026-07-28 ``tools/call`` of
``terminal_exec`` gets, for a command that is still running after a moment, a task
instead of a wait: ``resultType: "task"`` with a task id. The task is the job the
command became (``statusMessage`` names it, so every job tool works on it too).

* ``tasks/get``: ``working`` while the job runs; ``completed`` with the final
  ``terminal_exec`` result inline once it ends (however it ended: a failing command is
  a completed task whose envelope says so); ``cancelled`` after ``tasks/cancel``.
* ``tasks/cancel``: ends the job's whole process tree.
* ``tasks/update``: acknowledged; these tasks never ask for input.
* ``notifications/tasks``: the full task, on a ``subscriptions/listen`` stream that
  asked for the task's id (``taskIds``), whenever its status changes.

Clients that do not declare the extension (every handshake-era client) see no
change. Commands that finish within the moment are answered directly, as the
extension allows. Tasks are not offered for ``terminal_job_start``: its result is
the job handle, which is already "start now, collect later".
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import mcp_types as mt
import pydantic_core
from fastmcp.server.extensions import MethodBinding, ServerExtension
from fastmcp.tools import ToolResult
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict, Field, model_serializer

from ..core.jobs import iso
from ..core.tasks import TaskBook, TaskRecord, job_envelope
from ..errors import UserError
from .middleware import request_scope

if TYPE_CHECKING:
    from fastmcp import Context
    from fastmcp.server.extensions import ToolCallContinuation, ToolCallOutcome

    from ..core.jobs import Job, JobEvent
    from ..core.runtime import Runtime
    from .job_events import JobEvents

TASKS = "io.modelcontextprotocol/tasks"
TASK_TOOLS = frozenset({"terminal_exec"})
# A task-augmented command that is still running this long after it started becomes
# a task; a quicker one is answered at once.
TASK_AFTER_SEC = 0.2
POLL_INTERVAL_MS = 1000
_MODERN = frozenset(MODERN_PROTOCOL_VERSIONS)


class TaskParams(mt.RequestParams):
    """Params of tasks/get, tasks/cancel and tasks/update (its inputResponses unused)."""

    model_config = ConfigDict(populate_by_name=True, extra="allow")

    task_id: str = Field(alias="taskId")


class Wire(BaseModel):
    """A result sent exactly as built (the runner drops None fields of models, and the
    extension's ``ttlMs`` is required but nullable)."""

    payload: dict[str, Any]

    @model_serializer
    def _as_is(self) -> dict[str, Any]:
        return self.payload


class TaskUpdate:
    """A task's new state, for listen streams that asked for its id."""

    def __init__(self, task_id: str, task: dict[str, Any]) -> None:
        self.task_id = task_id
        self.task = task


class JobTasks(ServerExtension):
    identifier = TASKS

    def __init__(self, events: JobEvents, share_across_sessions: bool) -> None:
        self._events = events
        self._share = share_across_sessions
        self._book: TaskBook | None = None
        self._runtime: Runtime | None = None
        self._scopes: dict[str, str | None] = {}

    # -- lifetime ----------------------------------------------------------------------------

    def attach(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._book = TaskBook(runtime.jobs)
        runtime.jobs.add_listener(self._on_job)

    def detach(self) -> None:
        self._book = None
        self._runtime = None
        self._scopes.clear()

    def settings(self) -> dict[str, Any]:
        return {}

    def methods(self) -> Sequence[MethodBinding]:
        return [
            MethodBinding("tasks/get", TaskParams, self._get, protocol_versions=_MODERN),
            MethodBinding("tasks/update", TaskParams, self._update, protocol_versions=_MODERN),
            MethodBinding("tasks/cancel", TaskParams, self._cancel, protocol_versions=_MODERN),
        ]

    # -- creation ------------------------------------------------------------------------------

    async def intercept_tool_call(
        self,
        params: mt.CallToolRequestParams,
        context: Context,
        call_next: ToolCallContinuation,
    ) -> ToolCallOutcome:
        request = context.request_context
        opted_in = (
            params.name in TASK_TOOLS
            and request is not None
            and request.protocol_version in _MODERN
            and context.client_extension_settings(TASKS) is not None
        )
        if not opted_in or self._book is None or self._runtime is None:
            return await call_next()
        arguments = dict(params.arguments or {})
        arguments["auto_background_after_sec"] = TASK_AFTER_SEC
        params.arguments = arguments
        result = await call_next()
        payload = result.structured_content if isinstance(result, ToolResult) else None
        if not payload or not payload.get("auto_backgrounded") or not payload.get("job_id"):
            return result  # finished (or refused) at once: the ordinary result
        job = self._runtime.jobs.get(str(payload["job_id"]))
        record = self._book.create(job)
        self._scopes[record.task_id] = job.scope
        return Wire(payload={"resultType": "task", **self._task(record)})

    # -- the task's state ------------------------------------------------------------------

    def _task(self, record: TaskRecord, *, detailed: bool = False) -> dict[str, Any]:
        job = record.job
        status = record.status
        if status == "working":
            message = f"running as {job.id}; its output: terminal_job_logs(job_id='{job.id}')"
        elif status == "cancelled":
            message = f"cancelled: the process tree of {job.id} was ended"
        else:
            message = f"{job.id} ended ({job.end_reason}, exit code {job.exit_code})"
        task: dict[str, Any] = {
            "taskId": record.task_id,
            "status": status,
            "statusMessage": message,
            "createdAt": iso(record.created_wall),
            "lastUpdatedAt": iso(max(record.updated_wall, job.ended_wall or 0)),
            "ttlMs": None,  # kept while the job is; see exited_job_ttl_sec
            "pollIntervalMs": POLL_INTERVAL_MS,
        }
        if detailed and status == "completed":
            task["result"] = self._final_result(job)
        return task

    def _final_result(self, job: Job) -> dict[str, Any]:
        assert self._runtime is not None
        settings = self._runtime.settings
        envelope = job_envelope(self._runtime.jobs, job, settings.inline_max_kb * 1024)
        structured = envelope.model_dump(mode="json")
        return {
            "content": [{"type": "text", "text": pydantic_core.to_json(structured).decode()}],
            "structuredContent": structured,
            "isError": False,
        }

    def _on_job(self, event: JobEvent, job: Job) -> None:
        book = self._book
        if book is None:
            return
        record = book.of_job(job)
        if record is None:
            return
        if event == "forgotten":
            book.forget_job(job)
            self._scopes.pop(record.task_id, None)
            return
        if event == "ended":
            record.updated_wall = time.time()
            self._events.publish_task(TaskUpdate(record.task_id, self._task(record, detailed=True)))

    # -- methods ------------------------------------------------------------------------------

    def _record(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> TaskRecord:
        if self.client_settings(ctx) is None:
            raise MCPError(
                mt.MISSING_REQUIRED_CLIENT_CAPABILITY,
                f"declare the {TASKS} extension on this request to use tasks",
                data={"requiredCapabilities": {"extensions": {TASKS: {}}}},
            )
        record = self._book.get(task_id) if self._book is not None else None
        # Another client's task is as unknown as one that never existed.
        if record is None or self._scopes.get(task_id) != request_scope(self._share):
            raise MCPError(
                mt.INVALID_PARAMS,
                f"Failed to retrieve task: Task not found ({task_id!r}; a task is kept as "
                "long as its job)",
            )
        return record

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        return self._task(self._record(ctx, params.task_id), detailed=True)

    async def _update(
        self, ctx: ServerRequestContext[Any, Any], params: TaskParams
    ) -> dict[str, Any]:
        self._record(ctx, params.task_id)
        return {}  # these tasks never wait for input: nothing to deliver

    async def _cancel(
        self, ctx: ServerRequestContext[Any, Any], params: TaskParams
    ) -> dict[str, Any]:
        record = self._record(ctx, params.task_id)
        assert self._book is not None
        # If it ended meanwhile, the task completes instead (the extension allows it).
        with contextlib.suppress(UserError):
            await self._book.cancel(record)
        return {}

    def visible_task(self, task_id: str, scope: str | None) -> bool:
        return (
            self._book is not None
            and self._book.get(task_id) is not None
            and (self._scopes.get(task_id) == scope)
        )
