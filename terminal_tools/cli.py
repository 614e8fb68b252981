"""Command line: ``terminal-tools`` and ``python -m terminal_tools``.

In stdio mode stdout carries JSON-RPC only: no banner, no print; logs go to stderr.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import signal
import sys
from types import FrameType
from typing import Any

from . import __version__
from .config import Settings, env_name, setting_fields


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="terminal-tools",
        description="MCP server giving AI agents a complete, fast and safe terminal. Every "
        "option can also be set with the TERMINAL_TOOLS_* variable named after it.",
    )
    add = parser.add_argument
    add("--transport", choices=["stdio", "http"], help=f"default stdio ({env_name('transport')})")
    add("--host", help=f"HTTP bind address, default 127.0.0.1 ({env_name('host')})")
    add("--port", type=int, help=f"HTTP port, default 8765 ({env_name('port')})")
    add(
        "--tools",
        choices=["basic", "advanced", "all"],
        help=f"tool categories to serve, default all ({env_name('tools')})",
    )
    add("--workdir", help=f"default working directory of every tool ({env_name('workdir')})")
    add("--log-level", help=f"log level on stderr, default WARNING ({env_name('log_level')})")
    add(
        "--login-path",
        action="store_true",
        default=None,
        help=f"take PATH from the user's login shell ({env_name('login_path')})",
    )
    add("--policy", help=f"TOML command policy file ({env_name('policy')})")
    add("--audit-log", help=f"append a JSON line per call to this file ({env_name('audit_log')})")
    add(
        "--redact-secrets",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"mask secret env values in output, default on ({env_name('redact_secrets')})",
    )
    add("-V", "--version", action="version", version=f"terminal-tools {__version__}")
    return parser


def _setting_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Every option named after a setting, as an override (None: not given on the command
    line). Derived from the settings' own fields, so an option cannot be parsed and then
    forgotten on the way to the server."""
    names = {f.name for f in setting_fields()}
    return {name: value for name, value in vars(args).items() if name in names}


def _preflight(settings: Settings) -> None:
    """Refuse to start, in one line, on a setting the server could only fail on later (a
    traceback from inside the lifespan is all a client would show otherwise)."""
    if settings.policy:
        from .core.policy import Policy

        Policy.load(settings.policy)  # PolicyError is a ValueError naming the file
    if settings.audit_log:
        try:
            with open(settings.audit_log, "a", encoding="utf-8"):
                pass
        except OSError as exc:
            raise ValueError(
                f"cannot open --audit-log {settings.audit_log}: {exc.strerror}"
            ) from None


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _install_signal_handlers() -> None:
    from .server import kill_everything_now

    def handle(signum: int, frame: FrameType | None) -> None:
        # FastMCP skips its lifespan teardown on SIGTERM/SIGHUP and hangs on SIGINT while
        # the stdin reader blocks; end every child here and leave at once. Whatever
        # happens in the cleanup (an error, a /proc read that blocks), the server still
        # exits: SIGALRM's default action ends it within 5 s, and the watchdog process
        # then ends the children, as after a SIGKILL.
        if hasattr(signal, "SIGALRM"):  # POSIX
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.alarm(5)
        try:
            kill_everything_now()
        finally:
            os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, handle)


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    # No network at startup and no surprises from a stray .env in the launch directory.
    os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")
    os.environ.setdefault("FASTMCP_SHOW_SERVER_BANNER", "false")
    os.environ.setdefault("FASTMCP_ENV_FILE", os.devnull)
    try:
        settings = Settings.from_env(**_setting_overrides(args))
        if settings.workdir:
            workdir = os.path.abspath(os.path.expanduser(settings.workdir))
            if not os.path.isdir(workdir):
                raise ValueError(f"--workdir is not a directory: {workdir}")
            settings = _replace(settings, workdir=workdir)
        _preflight(settings)
    except ValueError as exc:
        print(f"terminal-tools: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    logging.basicConfig(
        stream=sys.stderr,
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    os.environ.setdefault("FASTMCP_LOG_LEVEL", settings.log_level.upper())

    from .core.processes import claim_whole_process
    from .server import build_server

    claim_whole_process()  # every child of this process is the server's
    _install_signal_handlers()
    if settings.transport == "stdio":
        _run_stdio(settings, build_server)
        return
    _run_http(settings, build_server)


def _run_stdio(settings: Settings, build_server) -> None:
    from .server import in_flight
    from .stdin_drain import hold_stdin_until_idle

    mcp = build_server(settings)
    # Requests read before stdin closed are answered before the server exits.
    hold_stdin_until_idle(in_flight(mcp).idle, settings.shutdown_grace_sec)
    mcp.run(transport="stdio", show_banner=False)


def _run_http(settings: Settings, build_server) -> None:
    from .http_auth import TokenError, prepare

    if not (settings.token or settings.tokens_file) and not _is_loopback(settings.host):
        print(
            f"terminal-tools: refusing to bind {settings.host} without a token; set "
            f"{env_name('token')} (anyone who can reach the port could run commands)",
            file=sys.stderr,
        )
        raise SystemExit(2)
    try:
        verifier, middleware = prepare(
            settings, lambda line: print(line, file=sys.stderr, flush=True)
        )
    except TokenError as exc:
        print(f"terminal-tools: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    mcp = build_server(settings, auth=verifier)
    print(
        f"terminal-tools: serving on http://{settings.host}:{settings.port}/mcp",
        file=sys.stderr,
        flush=True,
    )
    mcp.run(
        transport="http",
        host=settings.host,
        port=settings.port,
        host_origin_protection="auto",
        middleware=middleware,
        show_banner=False,
    )


def _replace(settings: Settings, **changes: object) -> Settings:
    import dataclasses

    return dataclasses.replace(settings, **changes)  # type: ignore[arg-type]
