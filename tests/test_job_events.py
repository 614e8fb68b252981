"""Job resources, subscriptions and end-of-job log messages, through the MCP client."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import anyio
import mcp_types
import pytest
from fastmcp import Client
from fastmcp.client.messages import MessageHandler
from mcp.client.subscriptions import listen
from mcp.shared.subscriptions import ResourceUpdated

from terminal_tools.config import Settings
from terminal_tools.server import JOB_EVENTS, build_server

from .conftest import call

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


class Recorder(MessageHandler):
    """Every notification the client receives, in order, with a way to wait for one."""

    def __init__(self) -> None:
        self.seen: list[mcp_types.ServerNotification] = []
        self._arrived = anyio.Event()

    async def on_notification(self, message: mcp_types.ServerNotification) -> None:
        self.seen.append(message)
        self._arrived.set()

    def of(self, kind: type) -> list[Any]:
        return [m for m in self.seen if isinstance(m, kind)]

    async def wait_for(self, kind: type, match: Any = None, timeout: float = 10) -> Any:
        with anyio.fail_after(timeout):
            while True:
                for message in self.of(kind):
                    if match is None or match(message):
                        return message
                self._arrived = anyio.Event()
                await self._arrived.wait()


def legacy(server: Any, recorder: Recorder | None = None, **kwargs: Any) -> Client:
    return Client(server, mode="legacy", message_handler=recorder, **kwargs)


def updated_for(uri: str) -> Any:
    return lambda message: str(message.params.uri) == uri


async def subscribe(client: Client, uri: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        await client.session.subscribe_resource(uri)


async def unsubscribe(client: Client, uri: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        await client.session.unsubscribe_resource(uri)


async def test_server_declares_resource_subscriptions_and_list_changes() -> None:
    async with legacy(build_server(Settings())) as client:
        resources = client.initialize_result.capabilities.resources
        assert resources.subscribe is True and resources.list_changed is True


async def test_subscribed_job_gets_updated_when_it_ends() -> None:
    recorder = Recorder()
    async with legacy(build_server(Settings()), recorder) as client:
        started = await call(client, "terminal_job_start", command="bash -c 'sleep 1'")
        uri = f"terminal://jobs/{started['job_id']}"
        await subscribe(client, uri)
        assert not recorder.of(mcp_types.ResourceUpdatedNotification)
        await recorder.wait_for(mcp_types.ResourceUpdatedNotification, updated_for(uri))
        detail = json.loads((await client.read_resource(uri))[0].text)
        assert detail["status"] == "exited" and detail["end_reason"] == "exit"


async def test_a_job_can_be_subscribed_to_by_name() -> None:
    recorder = Recorder()
    async with legacy(build_server(Settings()), recorder) as client:
        await call(client, "terminal_job_start", command="bash -c 'sleep 1'", name="build-7")
        await subscribe(client, "terminal://jobs/build-7")
        await recorder.wait_for(
            mcp_types.ResourceUpdatedNotification, updated_for("terminal://jobs/build-7")
        )


async def test_unsubscribed_job_sends_no_update() -> None:
    recorder = Recorder()
    async with legacy(build_server(Settings()), recorder) as client:
        started = await call(client, "terminal_job_start", command="bash -c 'sleep 1'")
        uri = f"terminal://jobs/{started['job_id']}"
        await subscribe(client, uri)
        await unsubscribe(client, uri)
        await call(client, "terminal_job_logs", job_id=started["job_id"], wait_until_exit=True)
        await anyio.sleep(0.2)
        assert not [m for m in recorder.of(mcp_types.ResourceUpdatedNotification)
                    if str(m.params.uri) == uri]


async def test_list_changes_when_a_job_starts_and_is_forgotten() -> None:
    recorder = Recorder()
    async with legacy(build_server(Settings()), recorder) as client:
        await subscribe(client, "terminal://jobs")
        started = await call(client, "terminal_job_start", command="true")
        await recorder.wait_for(mcp_types.ResourceListChangedNotification)
        await recorder.wait_for(
            mcp_types.ResourceUpdatedNotification, updated_for("terminal://jobs")
        )
        await call(client, "terminal_job_logs", job_id=started["job_id"], wait_until_exit=True)
        count = len(recorder.of(mcp_types.ResourceListChangedNotification))
        await call(client, "terminal_job_manage", action="forget", job_id=started["job_id"])
        await recorder.wait_for(
            mcp_types.ResourceListChangedNotification,
            lambda _: len(recorder.of(mcp_types.ResourceListChangedNotification)) > count,
        )


async def test_job_resources_show_the_list_and_the_tail_of_each_stream(tmp_path: Path) -> None:
    async with legacy(build_server(Settings())) as client:
        started = await call(
            client, "terminal_job_start",
            command="bash -c 'seq 1 5000; echo oops >&2'",
        )
        await call(client, "terminal_job_logs", job_id=started["job_id"], wait_until_exit=True)
        listed = json.loads((await client.read_resource("terminal://jobs"))[0].text)
        assert [j["job_id"] for j in listed] == [started["job_id"]]
        detail = json.loads(
            (await client.read_resource(f"terminal://jobs/{started['job_id']}"))[0].text
        )
        assert detail["stdout_bytes"] > 4096
        assert len(detail["stdout_tail"].encode()) <= 4096
        assert detail["stdout_tail"].endswith("4999\n5000\n")
        assert detail["stderr_tail"] == "oops\n"
        assert detail["exit_code"] == 0


async def test_reading_a_job_resource_does_not_use_up_its_notice(tmp_path: Path) -> None:
    async with legacy(build_server(Settings())) as client:
        started = await call(client, "terminal_job_start", command="true")
        await anyio.sleep(0.5)
        await client.read_resource(f"terminal://jobs/{started['job_id']}")
        await client.read_resource("terminal://jobs")
        result = await call(client, "terminal_glob", pattern="*.x", path=str(tmp_path))
        assert [n["job_id"] for n in result["ended_jobs"]] == [started["job_id"]]


async def test_unknown_job_resource_is_a_clear_error() -> None:
    async with legacy(build_server(Settings())) as client:
        with pytest.raises(Exception, match="unknown job"):
            await client.read_resource("terminal://jobs/job_nosuch")
        with pytest.raises(Exception, match="unknown job"):
            await subscribe(client, "terminal://jobs/job_nosuch")
        with pytest.raises(Exception, match="not a job resource"):
            await subscribe(client, "terminal://elsewhere")


async def test_subscriptions_end_with_their_session() -> None:
    server = build_server(Settings())
    async with legacy(server) as staying:
        started = await call(staying, "terminal_job_start", command="sleep 30")
        events = JOB_EVENTS[server]
        async with legacy(server) as leaving:
            await subscribe(leaving, f"terminal://jobs/{started['job_id']}")
            assert events.connections == 2 and events.subscriptions() == 1
        with anyio.fail_after(5):
            while events.connections != 1:
                await anyio.sleep(0.02)
        assert events.subscriptions() == 0
        await call(staying, "terminal_job_manage", action="signal_kill", job_id=started["job_id"])


async def test_a_log_message_arrives_when_a_job_ends() -> None:
    logs: list[Any] = []

    async def on_log(message: Any) -> None:
        logs.append(message)

    async with Client(build_server(Settings()), mode="legacy", log_handler=on_log) as client:
        started = await call(client, "terminal_job_start", command="bash -c 'exit 4'",
                             name="failing")
        with anyio.fail_after(10):
            while not logs:
                await anyio.sleep(0.02)
    (message,) = logs
    assert message.level == "info" and message.logger == "terminal-tools.jobs"
    assert started["job_id"] in message.data["msg"] and "exit code 4" in message.data["msg"]
    assert message.data["extra"]["exit_code"] == 4
    assert message.data["extra"]["semantic_status"] == "error"


async def test_modern_clients_hear_of_the_end_on_a_listen_stream() -> None:
    async with Client(build_server(Settings())) as client:
        started = await call(client, "terminal_job_start", command="bash -c 'sleep 1'")
        uri = f"terminal://jobs/{started['job_id']}"
        async with listen(client.session, resource_subscriptions=[uri]) as stream:
            assert stream.honored.resource_subscriptions == [uri]
            with anyio.fail_after(10):
                event = await stream.__anext__()
        assert event == ResourceUpdated(uri)
