"""Benchmarks: the server over real stdio, each figure next to a baseline from the same run.

    python bench/run.py            # all benchmarks, writes bench/results/latest.{json,md}
    python bench/run.py --quick    # fewer repetitions

The machine is shared and noisy: compare a figure with its baseline (same run), not
across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psutil

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
MiB = 1024 * 1024


class RawClient:
    """A minimal MCP client over stdio: newline-delimited JSON-RPC, nothing else.

    Real MCP clients (desktop apps, IDEs) are not Python; a lean client measures the
    server and the transport rather than a client library's own per-call work (the
    FastMCP client re-derives types from the output schema on every call).
    """

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.process: asyncio.subprocess.Process | None = None
        self._next = 0
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader: asyncio.Task[None] | None = None

    async def __aenter__(self) -> RawClient:
        env = {k: v for k, v in os.environ.items() if k in ("HOME", "PATH", "LANG", "USER")}
        self.process = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=env,
            cwd=str(HERE.parent),
            limit=256 * MiB,
        )
        self._reader = asyncio.ensure_future(self._read())
        await self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "terminal-tools-bench", "version": "1"},
            },
        )
        await self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.process and self.process.stdin
        self.process.stdin.close()
        await self.process.wait()
        if self._reader:
            self._reader.cancel()

    async def _send(self, message: dict[str, Any]) -> None:
        assert self.process and self.process.stdin
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        await self.process.stdin.drain()

    async def _read(self) -> None:
        assert self.process and self.process.stdout
        while True:
            line = await self.process.stdout.readline()
            if not line:
                return
            message = json.loads(line)
            waiter = self._waiting.pop(message.get("id", -1), None)
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

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self.request("tools/call", {"name": name, "arguments": arguments})
        if result.get("isError"):
            raise RuntimeError(result["content"][0]["text"])
        return result

    @property
    def pid(self) -> int:
        assert self.process
        return self.process.pid


def server() -> RawClient:
    return RawClient([sys.executable, "-m", "terminal_tools"])


# The floor: a bare FastMCP 4 server with one tool, set up as ours is (no update check, no
# banner, no .env file).
BARE_SERVER = """
import os
os.environ.update(FASTMCP_CHECK_FOR_UPDATES="off", FASTMCP_SHOW_SERVER_BANNER="false",
                  FASTMCP_ENV_FILE=os.devnull)
from fastmcp import FastMCP
mcp = FastMCP("noop")
@mcp.tool
async def noop() -> dict:
    return {"ok": True}
mcp.run(transport="stdio", show_banner=False)
"""

# Our server, started as `python -m terminal_tools` starts it, with the same no-op tool
# added: what our server does on every call around a tool body.
OUR_NOOP_SERVER = """
import terminal_tools.server as server
build = server.build_server
def with_noop(*args, **kwargs):
    mcp = build(*args, **kwargs)
    @mcp.tool(tags={"basic"})
    async def noop() -> dict:
        return {"ok": True}
    return mcp
server.build_server = with_noop
from terminal_tools.cli import main
main([])
"""


def script_server(source: str) -> tuple[RawClient, str]:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as handle:
        # The package of this checkout, as `python -m terminal_tools` from it imports.
        handle.write(f"import sys\nsys.path.insert(0, {str(HERE.parent)!r})\n" + source)
    return RawClient([sys.executable, handle.name]), handle.name


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"median": statistics.median(ordered), "p95": p95, "n": len(ordered)}


async def timed(n: int, action: Callable[[], Awaitable[Any]]) -> list[float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await action()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


async def paired(
    n: int, ours: Callable[[], Awaitable[Any]], baseline: Callable[[], Awaitable[Any]]
) -> tuple[list[float], list[float]]:
    """Time ``ours`` and ``baseline`` alternately, so that drift in a noisy machine's
    speed falls on both sides of the ratio alike."""
    ours_samples: list[float] = []
    baseline_samples: list[float] = []
    for _ in range(n):
        ours_samples += await timed(1, ours)
        baseline_samples += await timed(1, baseline)
    return ours_samples, baseline_samples


class PeakRss:
    """Samples a process's RSS every 5 ms in a thread."""

    def __init__(self, process: psutil.Process) -> None:
        self.process = process
        self.peak = process.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, self.process.memory_info().rss)
            except psutil.Error:
                return
            time.sleep(0.005)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


async def call(client: RawClient, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    return result.get("structuredContent") or {}


async def raw_spawn(argv: list[str]) -> None:
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    await process.communicate()


def row(
    name: str, value: str, baseline: str, target: str, met: bool | None, detail: dict[str, Any]
) -> dict[str, Any]:
    return {
        "benchmark": name,
        "value": value,
        "baseline": baseline,
        "target": target,
        "met": met,
        "detail": detail,
    }


async def startup_once(client: RawClient) -> tuple[float, int]:
    """Milliseconds from spawn to the first list_tools reply, and the RSS then."""
    start = time.perf_counter()
    async with client:
        await client.request("tools/list", {})
        elapsed = (time.perf_counter() - start) * 1000
        rss = psutil.Process(client.pid).memory_info().rss
    return elapsed, rss


async def bench_startup(runs: int) -> list[dict[str, Any]]:
    ours_ms: list[float] = []
    bare_ms: list[float] = []
    ours_rss: list[float] = []
    bare_rss: list[float] = []
    _, path = script_server(BARE_SERVER)
    try:
        for _ in range(runs):  # alternately
            ms, rss = await startup_once(server())
            ours_ms.append(ms)
            ours_rss.append(rss / MiB)
            ms, rss = await startup_once(RawClient([sys.executable, path]))
            bare_ms.append(ms)
            bare_rss.append(rss / MiB)
    finally:
        os.unlink(path)
    s, b = summary(ours_ms), summary(bare_ms)
    rs, rb = statistics.median(ours_rss), statistics.median(bare_rss)
    ratio = s["median"] / b["median"]
    return [
        row(
            "startup to first list_tools",
            f"{s['median']:.0f} ms (x{ratio:.2f})",
            f"bare FastMCP 4 server: {b['median']:.0f} ms",
            "<= 1.05x",
            ratio <= 1.05,
            {"server": s, "baseline": b},
        ),
        row(
            "RSS after the first list_tools",
            f"{rs:.0f} MiB (+{rs - rb:.1f})",
            f"bare FastMCP 4 server: {rb:.0f} MiB",
            "<= bare + 10 MiB",
            rs - rb <= 10,
            {"server_mib": ours_rss, "baseline_mib": bare_rss},
        ),
    ]


async def bench_calls(client: RawClient, runs: int) -> list[dict[str, Any]]:
    """Per-call cost: our server's no-op tool, the bare server's, and terminal_exec("true")
    against the bare tool plus a spawn of `true`, all timed in turn."""
    ours_noop, ours_path = script_server(OUR_NOOP_SERVER)
    bare, bare_path = script_server(BARE_SERVER)
    try:
        async with ours_noop, bare:
            for _ in range(5):  # warm up every path
                await ours_noop.call_tool("noop", {})
                await bare.call_tool("noop", {})
                await call(client, "terminal_exec", command="true")
            samples: dict[str, list[float]] = {"ours": [], "bare": [], "exec": [], "spawn": []}
            actions: dict[str, Callable[[], Awaitable[Any]]] = {
                "ours": lambda: ours_noop.call_tool("noop", {}),
                "bare": lambda: bare.call_tool("noop", {}),
                "exec": lambda: call(client, "terminal_exec", command="true"),
                "spawn": lambda: raw_spawn(["true"]),
            }
            for _ in range(runs):
                for name, action in actions.items():
                    samples[name] += await timed(1, action)
    finally:
        os.unlink(ours_path)
        os.unlink(bare_path)
    pipe = summary(
        await timed(runs, lambda: call(client, "terminal_exec", command="echo hi | cat"))
    )
    base_pipe = summary(await timed(runs, lambda: raw_spawn(["bash", "-c", "echo hi | cat"])))
    o, b, e, sp = (summary(samples[k]) for k in ("ours", "bare", "exec", "spawn"))
    ratio = o["median"] / b["median"]
    floor = b["median"] + sp["median"]
    return [
        row(
            "no-op tool round trip",
            f"{o['median']:.2f} ms (x{ratio:.2f})",
            f"bare FastMCP 4 tool: {b['median']:.2f} ms",
            "<= 1.05x",
            ratio <= 1.05,
            {"ours": o, "baseline": b},
        ),
        row(
            'terminal_exec("true") round trip',
            f"{e['median']:.2f} ms (floor +{e['median'] - floor:.2f})",
            f"bare tool {b['median']:.2f} ms + spawn `true` {sp['median']:.2f} ms",
            "<= floor + 0.2 ms",
            e["median"] <= floor + 0.2,
            {"exec": e, "bare_tool": b, "spawn": sp},
        ),
        row(
            'terminal_exec("echo hi | cat")',
            f"{pipe['median']:.2f} ms (p95 {pipe['p95']:.2f})",
            f"spawn `bash -c` from Python: {base_pipe['median']:.2f} ms",
            "-",
            None,
            {"exec": pipe, "baseline": base_pipe},
        ),
    ]


BIG_COMMAND = "head -c 67108864 /dev/urandom | base64 -w 120"
BIG_BYTES = 4 * (64 * MiB // 3 + 1) + -(-4 * (64 * MiB // 3 + 1) // 120)  # base64 + newlines


async def bench_big_output(client: RawClient, server: psutil.Process, runs: int) -> dict[str, Any]:
    ours: list[float] = []
    base: list[float] = []
    cpu: list[float] = []
    with PeakRss(server) as rss:
        for _ in range(runs):  # alternately
            cpu_before = sum(server.cpu_times()[:2])
            start = time.perf_counter()
            result = await client.call_tool(
                "terminal_exec", {"command": BIG_COMMAND, "timeout_sec": 120}
            )
            ours.append((time.perf_counter() - start) * 1000)
            cpu.append(sum(server.cpu_times()[:2]) - cpu_before)
            envelope = result["structuredContent"]
            # Every byte accounted for: counted, and either kept behind output_handle or
            # reported as dropped past the spool cap (nothing lost silently).
            dropped = envelope["output_dropped_bytes"]
            if envelope["stdout_bytes"] != BIG_BYTES or not envelope["output_handle"]:
                raise RuntimeError(f"64 MiB exec miscounted: {envelope['stdout_bytes']}")
            if dropped and not any(str(dropped) in note for note in envelope["notes"]):
                raise RuntimeError("dropped bytes not reported in notes")
            start = time.perf_counter()
            await raw_spawn(["bash", "-c", BIG_COMMAND + " > /dev/null"])
            base.append((time.perf_counter() - start) * 1000)
    size = len(json.dumps(result))
    s, b = summary(ours), summary(base)
    ratio = s["median"] / b["median"]
    return row(
        "terminal_exec of 64 MiB (base64: 86 MiB) output, every byte accounted",
        f"{s['median']:.0f} ms (x{ratio:.2f}), server CPU {statistics.median(cpu):.2f} s, "
        f"kept {(BIG_BYTES - dropped) / MiB:.0f} MiB + counted as dropped "
        f"{dropped / MiB:.0f} MiB, reply {size / 1024:.0f} KiB, "
        f"peak RSS {rss.peak / MiB:.0f} MiB",
        f"same command to /dev/null: {b['median']:.0f} ms",
        "<= 2x",
        ratio <= 2,
        {
            "tool": s,
            "baseline": b,
            "cpu_seconds": cpu,
            "dropped_bytes": dropped,
            "reply_bytes": size,
            "peak_rss": rss.peak,
        },
    )


async def bench_job_stream(client: RawClient, server: psutil.Process, mib: int) -> dict[str, Any]:
    cpu_before = sum(server.cpu_times()[:2])
    with PeakRss(server) as rss:
        start = time.perf_counter()
        job = await call(
            client, "terminal_job_start", command=f"head -c {mib * MiB} /dev/zero | tr '\\0' x"
        )
        offset = 0
        while True:
            page = await call(
                client,
                "terminal_job_logs",
                job_id=job["job_id"],
                since_offset=offset,
                max_bytes=MiB,
                wait_until_exit=False,
            )
            offset = page["next_offset"]
            if page["eof"]:
                break
            if not page["data"]:
                page = await call(
                    client,
                    "terminal_job_logs",
                    job_id=job["job_id"],
                    since_offset=offset,
                    max_bytes=1,
                    wait_for=".",
                    wait_timeout_sec=5,
                )
        elapsed = time.perf_counter() - start
    cpu = sum(server.cpu_times()[:2]) - cpu_before
    rate = offset / MiB / elapsed
    return row(
        f"job stream {mib} MiB in 1 MiB pages",
        f"{rate:.0f} MB/s, server CPU {cpu:.1f} s, peak RSS {rss.peak / MiB:.0f} MiB",
        "-",
        ">= 200 MB/s, RSS < 150 MiB",
        rate >= 200 and rss.peak < 150 * MiB,
        {"bytes": offset, "seconds": elapsed, "cpu_seconds": cpu, "peak_rss": rss.peak},
    )


async def bench_wait_latency(client: RawClient, runs: int) -> list[dict[str, Any]]:
    exit_samples = []
    match_samples = []
    for _ in range(runs):
        job = await call(client, "terminal_job_start", command="sleep 0.3; date +%s.%N")
        page = await call(
            client,
            "terminal_job_logs",
            job_id=job["job_id"],
            wait_until_exit=True,
            wait_timeout_sec=10,
        )
        exit_samples.append((time.time() - float(page["data"].strip())) * 1000)
        job = await call(
            client, "terminal_job_start", command="sleep 0.3; date +%s.%N; echo READY; sleep 5"
        )
        page = await call(
            client, "terminal_job_logs", job_id=job["job_id"], wait_for="READY", wait_timeout_sec=10
        )
        match_samples.append((time.time() - float(page["data"].split()[0])) * 1000)
        await call(client, "terminal_job_manage", action="signal_kill", job_id=job["job_id"])
    e, m = summary(exit_samples), summary(match_samples)
    return [
        row(
            "wait_until_exit: exit to reply",
            f"{e['median']:.1f} ms (p95 {e['p95']:.1f})",
            "-",
            "< 10 ms",
            e["median"] < 10,
            e,
        ),
        row(
            "wait_for: output to reply",
            f"{m['median']:.1f} ms (p95 {m['p95']:.1f})",
            "-",
            "< 10 ms",
            m["median"] < 10,
            m,
        ),
    ]


async def bench_concurrency(client: RawClient) -> dict[str, Any]:
    start = time.perf_counter()
    await asyncio.gather(*(call(client, "terminal_exec", command="sleep 0.5") for _ in range(16)))
    elapsed = time.perf_counter() - start
    return row(
        "16 concurrent `sleep 0.5`",
        f"{elapsed * 1000:.0f} ms",
        "ideal 500 ms",
        "< 800 ms",
        elapsed < 0.8,
        {"seconds": elapsed},
    )


async def bench_pty(client: RawClient, runs: int) -> dict[str, Any]:
    session = await call(client, "terminal_pty_open")
    sid = session["session_id"]
    await call(client, "terminal_pty_run", session_id=sid, command="true")
    s = summary(
        await timed(runs, lambda: call(client, "terminal_pty_run", session_id=sid, command="true"))
    )
    await call(client, "terminal_pty_close", session_id=sid)
    return row(
        'PTY run("true") round trip',
        f"{s['median']:.2f} ms (p95 {s['p95']:.2f})",
        "-",
        "< 10 ms",
        s["median"] < 10,
        s,
    )


def make_tree(root: Path, files: int) -> None:
    for index in range(files):
        folder = root / f"pkg{index % 40}" / f"mod{index % 13}"
        folder.mkdir(parents=True, exist_ok=True)
        suffix = ".py" if index % 4 == 1 else ".txt"  # 5,000 of 20,000
        body = "".join(f"line {n} of file {index}\n" for n in range(20))
        if index % 10 == 0:
            body += "needle_marker here\n"
        (folder / f"file{index}{suffix}").write_text(body)


def rg_binary() -> str:
    from terminal_tools.core.search import find_ripgrep

    found = find_ripgrep()
    if found is None:
        raise RuntimeError("rg not found")
    return found


async def bench_search(client: RawClient, runs: int) -> list[dict[str, Any]]:
    rg = rg_binary()
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        make_tree(root, 20000)
        await call(client, "terminal_rg", pattern="needle_marker", path=str(root), max_results=5000)
        ours, base = map(
            summary,
            await paired(
                runs,
                lambda: call(
                    client, "terminal_rg", pattern="needle_marker", path=str(root), max_results=5000
                ),
                lambda: raw_spawn([rg, "--json", "needle_marker", str(root)]),
            ),
        )
        glob_ours, glob_base = map(
            summary,
            await paired(
                runs,
                lambda: call(
                    client, "terminal_glob", pattern="*.py", path=str(root), max_results=20000
                ),
                lambda: raw_spawn([rg, "--files", "-g", "*.py", str(root)]),
            ),
        )
    rg_ratio = ours["median"] / base["median"]
    glob_ratio = glob_ours["median"] / glob_base["median"]
    return [
        row(
            "terminal_rg, 20,000 files, 2,000 matches",
            f"{ours['median']:.0f} ms (x{rg_ratio:.2f})",
            f"rg --json directly: {base['median']:.0f} ms",
            "<= 1.3x",
            rg_ratio <= 1.3,
            {"tool": ours, "baseline": base},
        ),
        row(
            "terminal_glob('*.py'), 20,000 files, 5,000 hits, mtime order",
            f"{glob_ours['median']:.0f} ms (x{glob_ratio:.2f})",
            f"rg --files -g '*.py' (unsorted): {glob_base['median']:.0f} ms",
            "<= 1.5x",
            glob_ratio <= 1.5,
            {"tool": glob_ours, "baseline": glob_base},
        ),
    ]


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        f"Measured {meta['date']} on {meta['machine']} ({meta['cpus']} CPUs), "
        f"Python {meta['python']}, command `{meta['command']}`.",
        "",
        "| benchmark | result | baseline (same run) | target | met |",
        "| --- | --- | --- | --- | --- |",
    ]
    for item in rows:
        met = "—" if item["met"] is None else ("yes" if item["met"] else "**no**")
        cells = [item["benchmark"], item["value"], item["baseline"], item["target"], met]
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


GROUPS = ("startup", "calls", "big", "stream", "wait", "concurrency", "pty", "search")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument(
        "--only", nargs="+", choices=GROUPS, default=list(GROUPS), help="run these groups only"
    )
    parser.add_argument("--name", default="latest", help="results file name (without suffix)")
    args = parser.parse_args()
    runs = 20 if args.quick else 100
    only = set(args.only)
    rows = await bench_startup(5 if args.quick else 15) if "startup" in only else []
    async with server() as client:
        process = psutil.Process(client.pid)
        if "calls" in only:
            rows += await bench_calls(client, runs)
        if "big" in only:
            rows.append(await bench_big_output(client, process, 3 if args.quick else 7))
        if "stream" in only:
            rows.append(await bench_job_stream(client, process, 64 if args.quick else 256))
        if "wait" in only:
            rows += await bench_wait_latency(client, 5 if args.quick else 15)
        if "concurrency" in only:
            rows.append(await bench_concurrency(client))
        if "pty" in only:
            rows.append(await bench_pty(client, runs))
        if "search" in only:
            rows += await bench_search(client, 10 if args.quick else 30)
    command = " ".join(["python bench/run.py", *sys.argv[1:]])
    meta = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "command": command,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    (RESULTS / f"{args.name}.md").write_text(markdown(rows, meta))
    print(markdown(rows, meta))


if __name__ == "__main__":
    asyncio.run(main())
