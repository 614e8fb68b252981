"""Job events for clients that can hear them: resources, subscriptions, log messages.

The job manager reports each job's start, end and retirement to :class:`JobEvents`
(synchronously, the moment it happens). From there:

* ``terminal://jobs`` and ``terminal://jobs/{job_id}`` are resources (the list; one
  job with the last 4 KiB of each stream). A handshake-era client may
  ``resources/subscribe`` to them: a subscribed job URI gets
  ``notifications/resources/updated`` when the job ends, the list URI whenever the
  list changes, and every connection gets ``notifications/resources/list_changed``
  when a job starts or is forgotten. A 2026-07-28 client gets the same events on a
  ``subscriptions/listen`` stream.
* At each job's end, a ``notifications/message`` (level info, logger
  ``terminal-tools.jobs``) goes to the connections of the job's owner, for clients that
  show server logs to the user.

Only connections that can see a job (see ``core/owners.py``) hear of it. A
connection's subscriptions end with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as mt
from anyio.streams.memory import MemoryObjectSendStream
from fastmcp import Context, FastMCP
from fastmcp.exceptions import ResourceError
from fastmcp.server.dependencies import bind_request_context
from fastmcp.server.extensions import read_client_extension_settings
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import (
    SUBSCRIPTION_ID_META_KEY,
    InMemorySubscriptionBus,
    ResourcesListChanged,
    ResourceUpdated,
)
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import event_matches, event_to_notification
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

from ..core import owners
from ..errors import UserError, printable
from .context import runtime_of
from .middleware import request_scope

if TYPE_CHECKING:
    from ..core.jobs import Job, JobEvent
    from ..core.runtime import Runtime

log = logging.getLogger(__name__)

JOBS_URI = "terminal://jobs"
JOB_URI = "terminal://jobs/{job_id}"
LOGGER = "terminal-tools.jobs"


def job_uris(job: Job) -> list[str]:
    uris = [f"terminal://jobs/{job.id}"]
    if job.name:
        uris.append(f"terminal://jobs/{job.name}")
    return uris


@dataclass(eq=False)
class _Connection:
    """A live handshake-era connection: where its notifications go, whose jobs it sees,
    and what it subscribed to."""

    session: ServerSession
    scope: str | None
    uris: set[str] = field(default_factory=set)
    # Resource notifications go to connections that use resources (listed, read or
    # subscribed to them): a client that never looks at resources gets no list noise.
    uses_resources: bool = False

    def sees(self, job: Job) -> bool:
        return self.scope is None or self.scope == job.scope


class JobEvents:
    def __init__(self, share_across_sessions: bool) -> None:
        self._share = share_across_sessions
        self._connections: dict[int, _Connection] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._runtime: Runtime | None = None
        self._detach: Callable[[], None] | None = None
        self.bus = InMemorySubscriptionBus()
        self.listen = ListenStreams(self)
        # Which task ids a caller may follow (set by the tasks extension).
        self.task_visible: Callable[[str, str | None], bool] = lambda task_id, scope: False

    # -- lifetime ----------------------------------------------------------------------------

    def attach(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._detach = runtime.jobs.add_listener(self._on_job)

    async def close(self) -> None:
        if self._detach is not None:
            self._detach()
            self._detach = None
        self.listen.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        self._connections.clear()
        self._runtime = None

    @property
    def connections(self) -> int:
        return len(self._connections)

    def subscriptions(self) -> int:
        return sum(len(c.uris) for c in self._connections.values())

    # -- connections -------------------------------------------------------------------------

    def connection(self, session: ServerSession, scope: str | None) -> _Connection | None:
        """The record of ``session``'s connection, created on its first request; ``None``
        on a 2026-07-28 connection (it has no channel for unrequested messages)."""
        connection = getattr(session, "_connection", None)
        if connection is None or connection.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return None
        key = id(connection)
        found = self._connections.get(key)
        if found is None:
            found = _Connection(session, scope)
            self._connections[key] = found
            if scope is not None and self._runtime is not None:
                self._runtime.jobs.notices.open_scope(scope)
            # The connection's exit stack unwinds when it closes (stdin EOF, HTTP session
            # ended): its subscriptions go with it.
            connection.exit_stack.callback(self._closed, key)
        elif scope is not None and found.scope != scope:
            # The handshake's own request carries no session id yet: later requests
            # name the connection's real scope.
            found.scope = scope
            if self._runtime is not None:
                self._runtime.jobs.notices.open_scope(scope)
        return found

    def _closed(self, key: int) -> None:
        gone = self._connections.pop(key, None)
        if gone is None or gone.scope is None or self._runtime is None:
            return
        if not any(c.scope == gone.scope for c in self._connections.values()):
            # Nobody is left in that scope to tell of its jobs' ends.
            self._runtime.jobs.notices.close_scope(gone.scope)

    # -- job events ----------------------------------------------------------------------------

    def _on_job(self, event: JobEvent, job: Job) -> None:
        uris = job_uris(job)
        for connection in list(self._connections.values()):
            if not connection.sees(job):
                continue
            if event != "ended" and connection.uses_resources:
                self._spawn(connection, connection.session.send_resource_list_changed())
            wanted = [uri for uri in (*uris, JOBS_URI) if uri in connection.uris]
            if event == "forgotten":
                wanted = [uri for uri in wanted if uri == JOBS_URI]
                connection.uris.difference_update(uris)
            for uri in wanted:
                self._spawn(connection, connection.session.send_resource_updated(uri))
            if event == "ended":
                self._spawn(connection, self._log_end(connection.session, job))
        self._publish(event, uris)

    def publish_task(self, update: Any) -> None:
        async def publish() -> None:
            await self.bus.publish(update)

        self._spawn(None, publish())

    def _publish(self, event: JobEvent, uris: list[str]) -> None:
        events: list[Any] = [ResourceUpdated(JOBS_URI)]
        if event == "ended":
            events += [ResourceUpdated(uri) for uri in uris]
        else:
            events.append(ResourcesListChanged())

        async def publish() -> None:
            for item in events:
                await self.bus.publish(item)

        self._spawn(None, publish())

    async def _log_end(self, session: ServerSession, job: Job) -> None:
        if self._runtime is None:
            return
        notice = self._runtime.jobs.notice_of(job)
        how = f"exit code {notice.exit_code}" if notice.end_reason == "exit" else notice.end_reason
        label = f"{job.id} ({job.name})" if job.name else job.id
        message = f"job {label} ended: {how}, {notice.semantic_status}: {notice.command}"
        await session.send_notification(
            mt.LoggingMessageNotification(
                params=mt.LoggingMessageNotificationParams(
                    level="info",
                    logger=LOGGER,
                    data={"msg": message, "extra": notice.model_dump(mode="json")},
                )
            )
        )

    def _spawn(self, connection: _Connection | None, send: Coroutine[Any, Any, None]) -> None:
        async def run() -> None:
            try:
                await send
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the client went away mid-send: forget it
                log.debug("job event not delivered: %s", exc)
                if connection is not None:
                    for key, known in list(self._connections.items()):
                        if known is connection:
                            self._connections.pop(key, None)

        task = asyncio.ensure_future(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- resources/subscribe (handshake era) ----------------------------------------------

    def _job_for(self, uri: str) -> None:
        """Refuse a URI that is not a job resource this caller can see."""
        if uri == JOBS_URI:
            return
        prefix = JOBS_URI + "/"
        if not uri.startswith(prefix) or not uri[len(prefix) :]:
            raise MCPError(
                mt.INVALID_PARAMS, f"not a job resource: {uri!r} (use {JOBS_URI} or {JOB_URI})"
            )
        if self._runtime is None:
            raise MCPError(mt.INTERNAL_ERROR, "the server is not running")
        try:
            self._runtime.jobs.get(uri[len(prefix) :])
        except UserError as exc:
            raise MCPError(mt.INVALID_PARAMS, str(exc)) from None

    def _scope(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        with bind_request_context(ctx):
            return request_scope(self._share)

    async def subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: mt.SubscribeRequestParams
    ) -> mt.EmptyResult:
        uri = str(params.uri)
        scope = self._scope(ctx)
        with owners.serving(scope):
            self._job_for(uri)
        connection = self.connection(ctx.session, scope)
        if connection is None:
            raise MCPError(mt.METHOD_NOT_FOUND, "use subscriptions/listen on this protocol version")
        connection.uris.add(uri)
        connection.uses_resources = True
        return mt.EmptyResult()

    async def unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: mt.UnsubscribeRequestParams
    ) -> mt.EmptyResult:
        connection = self.connection(ctx.session, self._scope(ctx))
        if connection is not None:
            connection.uris.discard(str(params.uri))
        return mt.EmptyResult()


class _TaskNotification(BaseModel):
    method: str = "notifications/tasks"
    params: dict[str, Any]


class ListenStreams:
    """Serves ``subscriptions/listen`` (2026-07-28): resource events as the protocol
    defines them, plus ``notifications/tasks`` for the task ids a stream asks for in
    ``notifications.taskIds`` (the tasks extension). One call is one stream: the
    acknowledgement first, then every matching event, until the client goes away."""

    MAX_BUFFERED = 1024

    def __init__(self, events: JobEvents) -> None:
        self.events = events
        self._streams: set[MemoryObjectSendStream[Any]] = set()

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], params: mt.SubscriptionsListenRequestParams
    ) -> mt.SubscriptionsListenResult:
        stream_id = ctx.request_id
        if stream_id is None:
            raise MCPError(mt.INVALID_REQUEST, "subscriptions/listen requires a request id")
        wanted = params.notifications
        asked_tasks = (wanted.model_extra or {}).get("taskIds") or []
        task_ids: list[str] = []
        if asked_tasks:
            from .tasks import TASKS

            if read_client_extension_settings(ctx, TASKS) is None:
                raise MCPError(
                    mt.MISSING_REQUIRED_CLIENT_CAPABILITY,
                    f"declare the {TASKS} extension to listen for task notifications",
                    data={"requiredCapabilities": {"extensions": {TASKS: {}}}},
                )
            with bind_request_context(ctx):
                scope = request_scope(self.events._share)
            task_ids = [
                t for t in asked_tasks if isinstance(t, str) and self.events.task_visible(t, scope)
            ]
        honored = mt.SubscriptionFilter(
            tools_list_changed=True if wanted.tools_list_changed else None,
            prompts_list_changed=True if wanted.prompts_list_changed else None,
            resources_list_changed=True if wanted.resources_list_changed else None,
            resource_subscriptions=list(wanted.resource_subscriptions or ()) or None,
            **({"taskIds": task_ids} if task_ids else {}),
        )
        uris = frozenset(honored.resource_subscriptions or ())
        tasks = frozenset(task_ids)
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: stream_id}
        send, receive = anyio.create_memory_object_stream[Any](self.MAX_BUFFERED)

        def deliver(event: Any) -> None:
            task_id = getattr(event, "task_id", None)
            wanted = (
                task_id in tasks if task_id is not None else event_matches(honored, uris, event)
            )
            if not wanted:
                return
            try:
                send.send_nowait(event)
            except anyio.WouldBlock:  # a client that stopped reading: end its stream
                log.warning("listen stream %r backlog full; ending it", stream_id)
                send.close()
            except anyio.ClosedResourceError:
                pass

        # Subscribed before the acknowledgement goes out, so nothing published while
        # it is being written is lost; this task alone writes the stream.
        unsubscribe = self.events.bus.subscribe(deliver)
        self._streams.add(send)
        try:
            await ctx.session.send_notification(
                mt.SubscriptionsAcknowledgedNotification(
                    params=mt.SubscriptionsAcknowledgedNotificationParams(
                        notifications=honored, _meta=meta
                    )
                ),
                related_request_id=stream_id,
            )
            async for event in receive:
                if getattr(event, "task_id", None) is not None:
                    note: Any = _TaskNotification(params={**event.task, "_meta": meta})
                else:
                    note = event_to_notification(event, meta)
                await ctx.session.send_notification(note, related_request_id=stream_id)
        finally:
            unsubscribe()
            self._streams.discard(send)
            send.close()
            receive.close()
        return mt.SubscriptionsListenResult(_meta=meta)

    def close(self) -> None:
        """End every stream gracefully (each sends its final result)."""
        for stream in list(self._streams):
            stream.close()


class KnowConnections(Middleware):
    """Every request makes its connection known, so that end-of-job log messages (and,
    once it uses resources, list changes) reach it without a subscription (inside
    Scoping)."""

    def __init__(self, events: JobEvents) -> None:
        self.events = events

    async def on_request(
        self, context: MiddlewareContext[Any], call_next: CallNext[Any, Any]
    ) -> Any:
        ctx = context.fastmcp_context
        if ctx is not None:
            with contextlib.suppress(Exception):
                known = self.events.connection(ctx.session, owners.current())
                if known is not None and (context.method or "").startswith("resources/"):
                    known.uses_resources = True
        return await call_next(context)


def register(mcp: FastMCP, events: JobEvents) -> None:
    mcp.add_middleware(KnowConnections(events))
    low = mcp._mcp_server
    low.add_request_handler("resources/subscribe", mt.SubscribeRequestParams, events.subscribe)
    low.add_request_handler(
        "resources/unsubscribe", mt.UnsubscribeRequestParams, events.unsubscribe
    )
    low.add_request_handler(
        "subscriptions/listen", mt.SubscriptionsListenRequestParams, events.listen
    )

    @mcp.resource(
        JOBS_URI,
        name="jobs",
        description="Background jobs you can see: status, end_reason, exit code, byte counts. "
        "Subscribe to hear when the list changes.",
        mime_type="application/json",
    )
    async def jobs_resource(ctx: Context) -> str:
        listed = runtime_of(ctx).jobs.list(shows_ends=False)
        return json.dumps([info.model_dump(mode="json") for info in listed], indent=1)

    @mcp.resource(
        JOB_URI,
        name="job",
        description="One background job (by id or name): status, end_reason, exit code, byte "
        "counts and the last 4 KiB of each stream. Subscribe to hear when it ends.",
        mime_type="application/json",
    )
    async def job_resource(job_id: str, ctx: Context) -> str:
        try:
            job = runtime_of(ctx).jobs.get(job_id)
        except UserError as exc:
            raise ResourceError(printable(str(exc))) from None
        return json.dumps(job.detail().model_dump(mode="json"), indent=1)
