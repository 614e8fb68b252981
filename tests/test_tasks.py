"""The MCP tasks extension, served from the job manager, through the FastMCP client.

The FastMCP client speaks the extension once a client extension declares it and
claims its ``resultType: "task"`` result; the one below does that and nothing more,
so the tests see the wire: create, get, cancel.
"""

from __future__ import annotations

from typing import Any, Literal

import anyio
import mcp_types as mt
import pytest
from fastmcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, NotificationBinding, ResultClaim
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict, Field

from terminal_tools.config import Settings
from terminal_tools.server import build_server

from .conftest import call, new_mark, wait_until_gone

pytestmark = pytest.mark.anyio

TASKS = "io.modelcontextprotocol/tasks"
OPT_IN = {"io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}}
TERMINAL = {"completed", "failed", "cancelled"}


class CreatedTask(mt.Result):
    model_config = ConfigDict(populate_by_name=True, extra="allow")

    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str
    status_message: str | None = Field(None, alias="statusMessage")
    created_at: str = Field(alias="createdAt")
    last_updated_at: str = Field(alias="lastUpdatedAt")
    ttl_ms: int | None = Field(alias="ttlMs")
    poll_interval_ms: int | None = Field(None, alias="pollIntervalMs")


class TaskIdParams(mt.RequestParams):
    model_config = ConfigDict(populate_by_name=True)

    task_id: str = Field(serialization_alias="taskId")


class GetTask(mt.Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams


class CancelTask(mt.Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams


class AnyResult(mt.Result):
    model_config = ConfigDict(extra="allow")


async def tasks_get(session: ClientSession, task_id: str, meta: Any = OPT_IN) -> dict[str, Any]:
    request = GetTask(params=TaskIdParams(task_id=task_id, _meta=meta))
    result = await session.send_request(request, AnyResult)
    return result.model_dump(by_alias=True, exclude_none=False)


async def tasks_cancel(session: ClientSession, task_id: str) -> dict[str, Any]:
    request = CancelTask(params=TaskIdParams(task_id=task_id, _meta=OPT_IN))
    return (await session.send_request(request, AnyResult)).model_dump(by_alias=True)


async def until_done(session: ClientSession, task_id: str, timeout: float = 20) -> dict[str, Any]:
    with anyio.fail_after(timeout):
        while True:
            task = await tasks_get(session, task_id)
            if task["status"] in TERMINAL:
                return task
            await anyio.sleep(0.05)


class TaskNotice(mt.NotificationParams):
    model_config = ConfigDict(extra="allow")


class TasksForTests(ClientExtension):
    """Declares the tasks extension; a claimed task is driven to its end with tasks/get;
    notifications/tasks are recorded."""

    identifier = TASKS

    def __init__(self) -> None:
        self.created: list[CreatedTask] = []
        self.notices: list[dict[str, Any]] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self._resolve)]

    def notifications(self) -> list[NotificationBinding[Any]]:
        return [NotificationBinding(
                method="notifications/tasks", params_type=TaskNotice, handler=self._noticed
            )]

    async def _noticed(self, params: TaskNotice) -> None:
        self.notices.append(params.model_dump(by_alias=True))

    async def _resolve(self, task: CreatedTask, ctx: ClaimContext) -> mt.CallToolResult:
        self.created.append(task)
        done = await until_done(ctx.session, task.task_id)
        return mt.CallToolResult.model_validate(done["result"])


def tasks_client(extension: TasksForTests | None = None) -> Client:
    return Client(build_server(Settings()), extensions=[extension or TasksForTests()])


async def start_task(client: Client, command: str, **arguments: Any) -> CreatedTask:
    created = await client.session.call_tool(
        "terminal_exec", {"command": command, **arguments}, allow_claimed=True
    )
    assert isinstance(created, CreatedTask), created
    return created


async def test_server_declares_the_extension() -> None:
    async with tasks_client() as client:
        capabilities = client.server_capabilities
        assert capabilities is not None
        extensions = capabilities.extensions or {}
        assert TASKS in extensions


async def test_a_task_goes_from_create_to_get_to_its_result() -> None:
    async with tasks_client() as client:
        created = await start_task(client, "bash -c 'sleep 0.6; echo finished; exit 2'")
        assert created.status == "working" and created.task_id.startswith("task_")
        assert created.ttl_ms is None and created.poll_interval_ms
        job_id = created.status_message.split()[2].rstrip(";")
        assert job_id.startswith("job_")
        working = await tasks_get(client.session, created.task_id)
        assert working["status"] == "working" and working["resultType"] == "complete"
        assert "result" not in working
        done = await until_done(client.session, created.task_id)
        assert done["status"] == "completed" and done["resultType"] == "complete"
        result = done["result"]
        assert result["isError"] is False
        envelope = result["structuredContent"]
        assert envelope["exit_code"] == 2 and envelope["stdout"] == "finished\n"
        assert envelope["semantic_status"] == "error" and envelope["job_id"] == job_id
        # The task is the job: every job tool works on it.
        page = await call(client, "terminal_job_logs", job_id=job_id)
        assert page["data"] == "finished\n"


async def test_the_client_can_let_the_task_resolve_transparently() -> None:
    extension = TasksForTests()
    async with tasks_client(extension) as client:
        result = await client.call_tool("terminal_exec", {"command": "bash -c 'sleep 0.5; echo ok'"})
        assert result.structured_content["stdout"] == "ok\n"
        assert result.structured_content["exit_code"] == 0
        assert len(extension.created) == 1


async def test_a_quick_command_is_answered_directly() -> None:
    extension = TasksForTests()
    async with tasks_client(extension) as client:
        result = await call(client, "terminal_exec", command="echo at-once")
        assert result["stdout"] == "at-once\n" and not extension.created


async def test_clients_without_the_extension_see_no_change() -> None:
    for mode in ("auto", "legacy"):
        async with Client(build_server(Settings()), mode=mode) as client:
            result = await call(client, "terminal_exec", command="bash -c 'sleep 0.5; echo waited'")
            assert result["stdout"] == "waited\n" and result["auto_backgrounded"] is False


async def test_cancel_ends_the_whole_process_tree() -> None:
    mark = new_mark()
    async with tasks_client() as client:
        created = await start_task(
            client, "bash -c 'sleep 300 & sleep 300; wait'", env={"TT_TEST_MARK": mark}
        )
        acknowledged = await tasks_cancel(client.session, created.task_id)
        assert acknowledged["resultType"] == "complete"
        done = await until_done(client.session, created.task_id)
        assert done["status"] == "cancelled" and "result" not in done
        assert not await wait_until_gone(mark, timeout=5)


async def test_unknown_task_is_invalid_params() -> None:
    async with tasks_client() as client:
        with pytest.raises(MCPError) as caught:
            await tasks_get(client.session, "task_nosuch")
        assert caught.value.error.code == mt.INVALID_PARAMS


async def test_task_methods_need_the_capability_on_the_request() -> None:
    server = build_server(Settings())
    async with Client(server, extensions=[TasksForTests()]) as client, Client(server) as plain:
        created = await start_task(client, "sleep 30")
        with pytest.raises(MCPError) as caught:
            await tasks_get(plain.session, created.task_id, meta=None)
        assert caught.value.error.code == mt.MISSING_REQUIRED_CLIENT_CAPABILITY
        await tasks_cancel(client.session, created.task_id)


async def test_a_listen_stream_for_the_task_gets_its_status_notification() -> None:
    extension = TasksForTests()
    async with tasks_client(extension) as client:
        created = await start_task(client, "bash -c 'sleep 0.5; echo noted'")
        listen = mt.SubscriptionsListenRequest(
            params=mt.SubscriptionsListenRequestParams(
                notifications=mt.SubscriptionFilter(taskIds=[created.task_id])
            )
        )
        async with anyio.create_task_group() as group:
            group.start_soon(client.session.send_request, listen, mt.SubscriptionsListenResult)
            with anyio.fail_after(10):
                while not extension.notices:
                    await anyio.sleep(0.02)
            group.cancel_scope.cancel()
    (notice,) = extension.notices
    assert notice["taskId"] == created.task_id and notice["status"] == "completed"
    assert notice["result"]["structuredContent"]["stdout"] == "noted\n"
