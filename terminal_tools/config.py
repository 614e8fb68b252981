"""Every limit and default of the server, in one typed settings object.

Each field can be set from the environment as ``TERMINAL_TOOLS_<FIELD NAME IN CAPITALS>``;
the command line overrides the environment for the options it exposes. The reference
``references/configuration.md`` lists every field, and a test keeps the two in step.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

ENV_PREFIX = "TERMINAL_TOOLS_"

Transport = Literal["stdio", "http"]
ToolSelection = Literal["basic", "advanced", "all"]
SearchEngine = Literal["auto", "ripgrep", "python"]
ContainmentSetting = Literal["auto", "subreaper", "marks"]

KiB = 1024
MiB = 1024 * 1024


def _setting(default: Any, doc: str, *, unit: str = "") -> Any:
    return field(default=default, metadata={"doc": doc, "unit": unit})


@dataclass(frozen=True)
class Settings:
    # Server and transport
    transport: Transport = _setting("stdio", "Transport: `stdio` or `http` (streamable HTTP).")
    host: str = _setting("127.0.0.1", "Address the HTTP transport binds.")
    port: int = _setting(8765, "Port of the HTTP transport.")
    token: str | None = _setting(
        None,
        "Bearer token the HTTP transport requires (at least 16 characters); a random one is "
        "generated (and printed to stderr once) when unset.",
    )
    tokens_file: str | None = _setting(
        None,
        "File of named HTTP bearer tokens, one `NAME TOKEN` per line (mode 600): each name is "
        "a principal that sees only its own jobs, PTY sessions and output handles.",
    )
    share_across_sessions: bool = _setting(
        False,
        "HTTP: let every MCP session of one principal (token) see and manage the jobs, PTY "
        "sessions and output handles of its other sessions (one user's several clients). "
        "Off: each session sees only what it created.",
    )
    tools: ToolSelection = _setting(
        "all", "Tool categories to serve: `basic`, `advanced` or `all`."
    )
    workdir: str | None = _setting(
        None,
        "Default working directory of every tool; otherwise the client's first MCP root, "
        "otherwise the server's own working directory.",
    )
    log_level: str = _setting("WARNING", "Log level of the server's own log (stderr).")
    login_path: bool = _setting(
        False,
        "Capture PATH once at startup from the user's login shell and give it to children "
        "(for servers launched by GUI apps with a minimal PATH).",
    )

    state_dir: str | None = _setting(
        None,
        "Folder (private to the user) where running servers register, so that a server "
        "starting later can end what a crashed one left; default: `terminal-tools-<uid>` "
        "in the temp folder. Servers using different folders never reap each other's.",
    )

    # Policy, audit and secrets
    policy: str | None = _setting(
        None, "Path of a TOML command policy (deny/warn rules, allow list, switches)."
    )
    audit_log: str | None = _setting(
        None, "Path of a JSON-lines audit log of every spawn-style call and signal."
    )
    redact_secrets: bool = _setting(
        True,
        "Mask the values of secret-looking environment variables in all output and in the "
        "audit log.",
    )
    secret_env_patterns: str = _setting(
        "*TOKEN*,*SECRET*,*PASSWORD*,*PASSWD*,*_KEY,*APIKEY*,*API_KEY*,*CREDENTIAL*,"
        "AWS_ACCESS_KEY_ID",
        "Comma-separated name patterns of the variables whose values are masked.",
    )

    # terminal_exec
    exec_timeout_sec: float = _setting(
        60.0, "Default `timeout_sec` of terminal_exec: deadline from command start.", unit="s"
    )
    exec_auto_background_sec: float = _setting(
        30.0,
        "Default `auto_background_after_sec` of terminal_exec: past it the command becomes a "
        "background job.",
        unit="s",
    )
    inline_max_kb: int = _setting(
        256,
        "Default `max_output_kb`: inline text per stream before head+tail truncation.",
        unit="KiB",
    )
    inline_max_kb_limit: int = _setting(
        4096, "Largest `max_output_kb` a call may ask for.", unit="KiB"
    )
    kill_grace_sec: float = _setting(
        1.0, "Time between SIGTERM and SIGKILL when a process tree is ended.", unit="s"
    )
    shutdown_grace_sec: float = _setting(
        10.0,
        "stdio: after stdin closes, how long requests already read may still run (and be "
        "answered) before the server exits.",
        unit="s",
    )
    containment: ContainmentSetting = _setting(
        "auto",
        "How the processes a command starts are held so that none outlives it: `auto` (a "
        "cgroup v2 per command where the server may create one, else child subreapers on "
        "Linux, else process trees and owner marks), `subreaper` or `marks` (a weaker net "
        "on purpose). server-info reports the one in use and why.",
    )
    drain_grace_sec: float = _setting(
        0.5,
        "After a command's main process exits, how long to wait for descendants that still "
        "hold its output pipes before they are ended.",
        unit="s",
    )

    # Output store (output_handle)
    store_max_bytes: int = _setting(
        64 * MiB,
        "Byte cap of the output store behind `output_handle` (LRU eviction).",
        unit="bytes",
    )
    store_ttl_sec: float = _setting(
        300.0, "Lifetime of an `output_handle` since its last access.", unit="s"
    )

    # Background jobs
    max_jobs: int = _setting(32, "Maximum number of running background jobs.")
    job_window_bytes: int = _setting(
        4 * MiB,
        "In-memory window of recent output per stream (jobs and running commands).",
        unit="bytes",
    )
    job_spool_bytes: int = _setting(
        256 * MiB,
        "Disk spool per stream of a job; output past it is dropped and counted.",
        unit="bytes",
    )
    spool_total_bytes: int = _setting(
        2048 * MiB, "Disk spool for all streams of the server together.", unit="bytes"
    )
    exited_jobs_kept: int = _setting(
        50, "How many exited jobs stay inspectable (oldest forgotten first)."
    )
    exited_job_ttl_sec: float = _setting(
        3600.0, "How long an exited job stays inspectable after it ends.", unit="s"
    )
    wait_cap_sec: float = _setting(
        45.0, "Longest server-side wait of one terminal_job_logs call.", unit="s"
    )
    job_logs_default_bytes: int = _setting(
        64 * KiB, "Default `max_bytes` of terminal_job_logs.", unit="bytes"
    )
    job_logs_max_bytes: int = _setting(
        8 * MiB, "Largest `max_bytes` a terminal_job_logs call may ask for.", unit="bytes"
    )

    # PTY sessions
    max_pty_sessions: int = _setting(8, "Maximum number of open PTY sessions.")
    pty_idle_timeout_sec: float = _setting(
        1800.0, "Default idle time after which a PTY session is closed.", unit="s"
    )
    pty_run_timeout_sec: float = _setting(
        30.0, "Default time terminal_pty_run waits for a command to finish.", unit="s"
    )

    # Search
    search_engine: SearchEngine = _setting(
        "auto",
        "Search engine: `auto` (ripgrep if found, else Python), `ripgrep` or `python`.",
    )
    search_timeout_sec: float = _setting(
        20.0, "Time limit of one terminal_rg / terminal_glob call.", unit="s"
    )
    search_max_results: int = _setting(
        500,
        "Default `max_results` of terminal_rg.",
    )
    glob_max_results: int = _setting(1000, "Default `max_results` of terminal_glob.")
    regex_timeout_sec: float = _setting(
        1.0,
        "Time limit for one regular-expression evaluation in the server (per file for the "
        "Python search engine, per piece of new output for `wait_for` and `expect`).",
        unit="s",
    )
    output_search_timeout_sec: float = _setting(
        10.0,
        "Time limit of one terminal_output_get `pattern` search, the whole call; past it the "
        'matches found so far come back with `truncated: "timeout"`.',
        unit="s",
    )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Build settings from ``TERMINAL_TOOLS_*`` variables, then apply ``overrides``.

        ``overrides`` whose value is ``None`` are ignored, so unset CLI options fall through
        to the environment and then to the defaults.
        """
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            raw = environ.get(env_name(f.name))
            if raw is not None and raw != "":
                values[f.name] = _parse(f, raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        settings = cls(**values)
        settings.validate()
        return settings

    def validate(self) -> None:
        positive = [
            "max_jobs",
            "max_pty_sessions",
            "job_window_bytes",
            "store_max_bytes",
            "inline_max_kb",
            "inline_max_kb_limit",
            "job_logs_default_bytes",
            "job_logs_max_bytes",
            "search_max_results",
            "glob_max_results",
            "wait_cap_sec",
            "regex_timeout_sec",
            "output_search_timeout_sec",
        ]
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"setting {name} must be positive, got {getattr(self, name)!r}")
        for name in [
            "job_spool_bytes",
            "spool_total_bytes",
            "exited_jobs_kept",
            "kill_grace_sec",
            "drain_grace_sec",
            "shutdown_grace_sec",
            "exec_timeout_sec",
            "exec_auto_background_sec",
        ]:
            if getattr(self, name) < 0:
                raise ValueError(f"setting {name} must not be negative")
        if self.inline_max_kb > self.inline_max_kb_limit:
            raise ValueError("inline_max_kb must not exceed inline_max_kb_limit")
        if self.log_level.upper() not in _LOG_LEVELS:
            raise ValueError(
                f"log_level must be one of {', '.join(_LOG_LEVELS)}, got {self.log_level!r}"
            )
        if not 0 < self.port < 65536:
            raise ValueError(f"port must be 1-65535, got {self.port}")


_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def env_name(field_name: str) -> str:
    return ENV_PREFIX + field_name.upper()


def setting_fields() -> list[dataclasses.Field[Any]]:
    return list(dataclasses.fields(Settings))


def _parse(f: dataclasses.Field[Any], raw: str) -> Any:
    kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    name = env_name(f.name)
    try:
        if kind == "bool":
            lowered = raw.strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
    except ValueError:
        raise ValueError(f"{name}: cannot read {raw!r} as {kind}") from None
    literal = {
        "Transport": Transport,
        "ToolSelection": ToolSelection,
        "SearchEngine": SearchEngine,
        "ContainmentSetting": ContainmentSetting,
    }.get(kind)
    if literal is not None and raw not in get_args(literal):
        raise ValueError(f"{name}: expected one of {', '.join(get_args(literal))}, got {raw!r}")
    return raw
