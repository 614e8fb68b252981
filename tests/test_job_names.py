"""Named jobs: [a-z0-9-], at most 63 characters, reusable once ended, usable as the id."""

from __future__ import annotations

import json

import pytest
from fastmcp import Client

from .conftest import call, call_error

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("name", ["Build", "my_job", "dev server", "x" * 64, "", "büild"])
async def test_bad_names_are_refused_with_the_rule(client: Client, name: str) -> None:
    error = await call_error(client, "terminal_job_start", command="true", name=name)
    assert "lowercase letters, digits and '-'" in error and "63" in error


async def test_longest_allowed_name_works_everywhere(client: Client) -> None:
    name = "a-" * 31 + "z"
    assert len(name) == 63
    started = await call(client, "terminal_job_start", command="echo named", name=name)
    page = await call(client, "terminal_job_logs", job_id=name, wait_until_exit=True)
    assert page["job_id"] == started["job_id"] and page["data"] == "named\n"
    managed = await call(client, "terminal_job_manage", action="forget", job_id=name)
    assert managed["job_id"] == started["job_id"]


async def test_running_name_is_taken_and_free_again_once_ended(client: Client) -> None:
    first = await call(client, "terminal_job_start", command="sleep 30", name="server")
    error = await call_error(client, "terminal_job_start", command="true", name="server")
    assert "taken by running job" in error and first["job_id"] in error
    await call(client, "terminal_job_manage", action="signal_kill", job_id="server")
    second = await call(client, "terminal_job_start", command="echo again", name="server")
    assert second["job_id"] != first["job_id"]
    # The name now means the newest job.
    page = await call(client, "terminal_job_logs", job_id="server", wait_until_exit=True)
    assert page["job_id"] == second["job_id"] and page["data"] == "again\n"
    detail = json.loads((await client.read_resource("terminal://jobs/server"))[0].text)
    assert detail["job_id"] == second["job_id"]


async def test_notice_carries_the_name(client: Client, tmp_path) -> None:
    import anyio

    await call(client, "terminal_job_start", command="true", name="quick-one")
    await anyio.sleep(0.5)
    result = await call(client, "terminal_glob", pattern="*.x", path=str(tmp_path))
    assert [n["name"] for n in result["ended_jobs"]] == ["quick-one"]
