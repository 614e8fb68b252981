"""The services of one running server, created at startup and closed at shutdown.

Nothing here knows about MCP: tests and benchmarks can drive a :class:`Runtime` directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..config import Settings
from . import watchdog
from .audit import AuditLog
from .buffers import SpoolBudget
from .jobs import JobManager
from .launch import LaunchGate
from .policy import Policy
from .processes import ProcessRegistry, new_instance_id
from .redact import Redactor, secret_values
from .search import find_ripgrep
from .shell import OWNER_ENV, login_path, resolve_shell
from .store import OutputStore

if TYPE_CHECKING:
    from .pty import PtyManager

log = logging.getLogger(__name__)


def _pty_manager(runtime: Runtime) -> PtyManager | None:
    if os.name != "posix":
        return None  # no PTY support on Windows (the PTY tools are not registered)
    from .pty import PtyManager  # needs termios

    return PtyManager(
        settings=runtime.settings,
        registry=runtime.registry,
        launch=runtime.launch,
        audit=runtime.audit,
    )


def detect_user_shell() -> str | None:
    """The shell the server was started from (reported only; never used to run zsh)."""
    try:
        import shellingham

        return str(shellingham.detect_shell()[1])
    except Exception:
        return os.environ.get("SHELL")


# CPU work handed to worker threads (a large command's analysis, a PTY screen render)
# holds the GIL; the event loop waits for it at each switch interval. At 1 ms instead of
# the default 5 ms, a concurrent call's loop turns wait a fifth as long.
_GIL_SWITCH_INTERVAL_SEC = 0.001


class Runtime:
    def __init__(self, settings: Settings) -> None:
        sys.setswitchinterval(_GIL_SWITCH_INTERVAL_SEC)
        self.settings = settings
        self.instance = new_instance_id()
        self.server_cwd = os.getcwd()
        self.base_env = dict(os.environ)
        self.path_source = "server environment"
        self.user_shell = detect_user_shell()
        if settings.login_path:
            self._capture_login_path()
        bundled_rg = find_ripgrep()
        self.ripgrep = bundled_rg if settings.search_engine != "python" else None
        self.children_rg = self._offer_ripgrep(bundled_rg)
        self.policy = Policy.load(settings.policy) if settings.policy else Policy()
        self._secret_patterns = settings.secret_env_patterns.split(",")
        self._base_secrets = (
            secret_values(self.base_env, self._secret_patterns) if settings.redact_secrets else {}
        )
        self.redactor = Redactor(self._base_secrets)
        self.audit = AuditLog(settings.audit_log, self.redactor)
        self.budget = SpoolBudget(settings.spool_total_bytes)
        self.registry = ProcessRegistry(
            instance=self.instance,
            window_bytes=settings.job_window_bytes,
            budget=self.budget,
            kill_grace=settings.kill_grace_sec,
            drain_grace=settings.drain_grace_sec,
            containment=settings.containment,
        )
        self.store = OutputStore(settings.store_max_bytes, settings.store_ttl_sec)
        self.launch = LaunchGate(
            policy=self.policy,
            audit=self.audit,
            base_env=self.base_env,
            next_owner=self.registry.next_owner,
            redactor_for=self.redactor_for,
        )
        self.jobs = JobManager(self.registry, settings, self.launch, self.audit)
        self._ptys = _pty_manager(self)
        self.reaped_at_start = 0
        self._startup: asyncio.Task[None] | None = None
        self.closed = False

    def _capture_login_path(self) -> None:
        shell = self.user_shell or resolve_shell().path
        if not shell or "/" not in shell:
            shell = resolve_shell().path
        path = login_path(shell)
        if path:
            self.base_env["PATH"] = path
            self.path_source = f"login shell ({shell})"
        else:
            log.warning("could not read PATH from the login shell %s; keeping the server's", shell)

    def _offer_ripgrep(self, rg: str | None) -> str:
        """Commands may call ``rg`` (the skills recommend it): when the children's PATH
        has none, append the folder of the rg the server found. Appended, so that any
        rg the user installs later on PATH still comes first. Says what happened."""
        path = self.base_env.get("PATH", "")
        own = shutil.which("rg", path=path)
        if own:
            return f"on PATH: {own}"
        if rg is None:
            return "none: no rg on PATH and none bundled"
        folder = os.path.dirname(rg)
        self.base_env["PATH"] = f"{path}{os.pathsep}{folder}" if path else folder
        return f"bundled, appended to the end of PATH: {rg}"

    @property
    def ptys(self) -> PtyManager:
        if self._ptys is None:
            raise RuntimeError("PTY sessions are not supported on this platform")
        return self._ptys

    def search_env(self) -> dict[str, str]:
        """Environment for search helpers: ours, marked, with no ripgrep config file."""
        env = {k: v for k, v in self.base_env.items() if k != "RIPGREP_CONFIG_PATH"}
        env[OWNER_ENV] = self.registry.next_owner()
        return env

    def redactor_for(self, overrides: Mapping[str, object] | None) -> Redactor:
        """The masker for a child: secrets of the server's environment (found once, at
        startup) plus those a call's ``env`` brings."""
        if not self.settings.redact_secrets:
            return self.redactor
        extra = {k: v for k, v in (overrides or {}).items() if isinstance(v, str)}
        found = secret_values(extra, self._secret_patterns) if extra else {}
        return Redactor({**self._base_secrets, **found}) if found else self.redactor

    def default_workdir(self) -> str:
        return self.settings.workdir or self.server_cwd

    async def start(self) -> None:
        """Background startup work that must not delay the first request."""
        self.state_dir = self.settings.state_dir or watchdog.default_state_dir()
        self._startup = asyncio.ensure_future(self._reap_predecessors())

    async def _reap_predecessors(self) -> None:
        with contextlib.suppress(Exception):
            await asyncio.to_thread(watchdog.register_instance, self.state_dir, self.instance)
            self.reaped_at_start = await asyncio.to_thread(
                watchdog.reap_predecessors, self.instance, self.state_dir
            )
            if self.reaped_at_start:
                log.warning(
                    "ended %d processes left by a previous server that died", self.reaped_at_start
                )

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._startup is not None:
            self._startup.cancel()
        self.jobs.begin_shutdown()
        if self._ptys is not None:
            await self._ptys.shutdown()
        await self.registry.shutdown()
        await self.jobs.shutdown()
        watchdog.unregister_instance(self.state_dir, self.instance)
        self.store.clear()
        self.budget.cleanup()
        self.audit.close()

    def kill_all_now(self) -> None:
        """For signal handlers: end every child synchronously."""
        self.registry.kill_all_now()
