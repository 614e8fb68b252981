"""How soon a finished job reaches the client: exit -> resources/updated, exit -> tasks/get.

    python bench/completion.py            # 30 samples of each
    python bench/completion.py --n 10

Each job prints the wall-clock time in nanoseconds as its very last act (``exec date
+%s%N``: the process exits right after writing it), so "exit" below is that moment,
read back from the job's own output; the client notes when the event reaches it. Same
machine, same clock. Target: under 5 ms each.

* resources/updated: the server over real stdio (a raw newline-delimited JSON-RPC
  client, handshake era, as desktop clients speak), subscribed to
  ``terminal://jobs/{job_id}``.
* tasks/get: the FastMCP client in memory on the 2026-07-28 protocol with the tasks
  extension declared, polling ``tasks/get`` every millisecond (the figure is how stale
  a poll can be, not the suggested poll interval).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Literal

HERE = Path(__file__).resolve().parent
COMMAND = "sh -c 'sleep 0.2; exec date +%s%N'"
TASKS = "io.modelcontextprotocol/tasks"


class StdioClient:
    """Newline-delimited JSON-RPC over the server's stdio; notifications are queued."""

    def __init__(self) -> None:
        self.process: asyncio.subprocess.Process | None = None
        self._next = 0
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.notifications: asyncio.Queue[tuple[int, dict[str, Any]]] = asyncio.Queue()

    async def __aenter__(self) -> StdioClient:
        env = {
            k: v
            for k, v in os.environ.items()
            if k in ("HOME", "PATH", "LANG", "USER", "PYTHONPATH")
        }
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "terminal_tools",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=env,
            cwd=str(HERE.parent),
        )
        self._reader = asyncio.ensure_future(self._read())
        await self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "completion-bench", "version": "1"},
            },
        )
        await self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.process and self.process.stdin
        self.process.stdin.close()
        await self.process.wait()
        self._reader.cancel()

    async def _send(self, message: dict[str, Any]) -> None:
        assert self.process and self.process.stdin
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        await self.process.stdin.drain()

    async def _read(self) -> None:
        assert self.process and self.process.stdout
        while line := await self.process.stdout.readline():
            arrived = time.time_ns()
            message = json.loads(line)
            if "id" not in message:
                self.notifications.put_nowait((arrived, message))
                continue
            waiter = self._waiting.pop(message["id"], None)
            if waiter is not None and not waiter.done():
                waiter.set_result(message)

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._next += 1
        waiter = asyncio.get_running_loop().create_future()
        self._waiting[self._next] = waiter
        await self._send({"jsonrpc": "2.0", "id": self._next, "method": method, "params": params})
        reply = await waiter
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return reply["result"]

    async def tool(self, name: str, **arguments: Any) -> dict[str, Any]:
        result = await self.request("tools/call", {"name": name, "arguments": arguments})
        if result.get("isError"):
            raise RuntimeError(result["content"][0]["text"])
        return result["structuredContent"]


async def exit_to_resource_update(n: int) -> list[float]:
    samples = []
    async with StdioClient() as client:
        for _ in range(n):
            job = await client.tool("terminal_job_start", command=COMMAND)
            uri = f"terminal://jobs/{job['job_id']}"
            await client.request("resources/subscribe", {"uri": uri})
            while True:
                arrived, message = await asyncio.wait_for(client.notifications.get(), 10)
                if message["method"] == "notifications/resources/updated" and (
                    message["params"]["uri"] == uri
                ):
                    break
            page = await client.tool("terminal_job_logs", job_id=job["job_id"])
            samples.append((arrived - int(page["data"])) / 1e6)
    return samples


async def exit_to_task_completed(n: int) -> tuple[list[float], list[float]]:
    import mcp_types as mt
    from fastmcp import Client
    from mcp.client.extension import ClientExtension, ResultClaim
    from pydantic import ConfigDict, Field

    from terminal_tools.config import Settings
    from terminal_tools.server import build_server

    class Created(mt.Result):
        model_config = ConfigDict(populate_by_name=True, extra="allow")
        result_type: Literal["task"] = Field(alias="resultType")
        task_id: str = Field(alias="taskId")

    class Params(mt.RequestParams):
        task_id: str = Field(serialization_alias="taskId")

    class Get(mt.Request[Params, Literal["tasks/get"]]):
        method: Literal["tasks/get"] = "tasks/get"
        params: Params

    class Answer(mt.Result):
        model_config = ConfigDict(extra="allow")

    async def unused(task: Created, ctx: Any) -> mt.CallToolResult:
        raise RuntimeError("the bench drives tasks itself")

    class Tasks(ClientExtension):
        identifier = TASKS

        def claims(self) -> list[ResultClaim[Any]]:
            return [ResultClaim(result_type="task", model=Created, resolve=unused)]

    samples: list[float] = []
    round_trips: list[float] = []
    async with Client(build_server(Settings()), extensions=[Tasks()]) as client:
        for _ in range(n):
            created = await client.session.call_tool(
                "terminal_exec", {"command": COMMAND}, allow_claimed=True
            )
            assert isinstance(created, Created), created
            while True:
                sent = time.time_ns()
                answer = await client.session.send_request(
                    Get(params=Params(task_id=created.task_id)), Answer
                )
                seen = time.time_ns()
                round_trips.append((seen - sent) / 1e6)
                task = answer.model_dump(by_alias=True)
                if task["status"] != "working":
                    break
                # In memory the client shares the server's event loop: yield it for a
                # moment, or back-to-back polls would delay the exit they wait for.
                await asyncio.sleep(0.001)
            printed = int(task["result"]["structuredContent"]["stdout"])
            samples.append((seen - printed) / 1e6)
    return samples, round_trips


def describe(name: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    median = statistics.median(ordered)
    verdict = "met" if median < 5 else "NOT met"
    figures = f"median {median:.2f} ms, p95 {p95:.2f} ms, n={len(ordered)}"
    return f"{name}: {figures} (target < 5 ms: {verdict})"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=30)
    args = parser.parse_args()
    print(describe("exit -> resources/updated (stdio)", await exit_to_resource_update(args.n)))
    samples, round_trips = await exit_to_task_completed(args.n)
    print(describe("exit -> tasks/get completed (in memory)", samples))
    print(f"  one tasks/get round trip: median {statistics.median(round_trips):.2f} ms")


if __name__ == "__main__":
    asyncio.run(main())
