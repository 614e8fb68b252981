"""Typed results of every tool (pydantic models: clients get structuredContent and an
outputSchema). Field descriptions are part of the public API and of the references."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SemanticStatus = Literal["ok", "signal", "error"]
ShellKindField = Literal["bash", "sh", "powershell", "cmd", "direct"]
JobStatus = Literal["running", "exited"]
EndReason = Literal["exit", "signal", "timeout", "killed", "shutdown"]

END_REASON_DOC = (
    "How the job ended (null while running): exit (it exited by itself), signal (a signal "
    "ended it), timeout (its deadline passed and the tree was killed), killed (a "
    "terminal_job_manage signal ended it), shutdown (the server stopped)."
)
STATUS_DOC = "running or exited; how it ended is end_reason."


class Result(BaseModel):
    model_config = ConfigDict(extra="forbid")


# A policy refusal reads the same in every tool that starts something: the tool's own
# result with blocked=true, the reason in `error`, and nothing started (no ids).
BLOCKED = "Refused by the server's policy (a rule or a switched-off tool); nothing was started."
REFUSAL = "Why nothing was started (with blocked=true: the policy's reason)."


class EndedJob(Result):
    """A background job that ended since its client last looked (announced once)."""

    job_id: str
    name: str | None
    command: str = Field(description="The command line, cut to about 120 characters.")
    status: Literal["exited"]
    end_reason: EndReason | None = Field(description=END_REASON_DOC)
    exit_code: int | None
    semantic_status: SemanticStatus | None
    semantic_message: str | None
    runtime_ms: int
    stdout_bytes: int
    stderr_bytes: int
    read_with: str | None = Field(
        description="The call that reads its output; null when the job is no longer kept."
    )


def ended_jobs_field() -> list[EndedJob]:
    return Field(
        default_factory=list,
        description="Background jobs of yours that ended since you last looked, each "
        "announced once; empty when there are none.",
    )


class Limits(Result):
    """Resource limits for a command (applied with ulimit before it starts)."""

    # Upper bounds keep each value inside what `ulimit` accepts: past them bash refuses
    # ("limit out of range") or the value wraps to 0 and kills the command at once.
    cpu_sec: int | None = Field(None, gt=0, le=10**8, description="CPU seconds (RLIMIT_CPU).")
    rss_mb: int | None = Field(
        None,
        gt=0,
        le=2**30,
        description="Memory in MiB, enforced as address space (RLIMIT_AS).",
    )
    fsize_mb: int | None = Field(
        None, gt=0, le=2**30, description="Largest file it may write, MiB."
    )
    nofile: int | None = Field(None, gt=0, le=2**20, description="Open file descriptors.")


class ExecResult(Result):
    """The envelope of every spawn-style call."""

    exit_code: int | None = Field(
        description="Exit status; negative = killed by that signal; null while running "
        "(auto_backgrounded) or when nothing was started (see error)."
    )
    stdout: str = Field(description="Standard output as text (noise-controlled unless raw).")
    stderr: str = Field(description="Standard error as text.")
    stdout_truncated_bytes: int = Field(
        description="Bytes of stdout text not shown inline; >0 means read the rest through "
        "output_handle."
    )
    stderr_truncated_bytes: int = Field(description="Same for stderr.")
    runtime_ms: int = Field(description="Time from start to exit (or to now, if running).")
    pid: int | None = Field(description="Process id of the command (its process group id).")
    output_handle: str | None = Field(
        description="Handle for terminal_output_get when output did not fit inline."
    )
    timed_out: bool = Field(description="True when timeout_sec expired and the tree was killed.")
    semantic_status: SemanticStatus = Field(
        description="What the exit means: ok, signal (killed by a signal) or error. Read "
        "this before exit_code."
    )
    semantic_message: str | None = Field(
        description="Why, e.g. 'No matches found' for grep exit 1."
    )
    warning: str | None = Field(description="Destructive pattern found in the command.")
    auto_backgrounded: bool = Field(
        description="True when the command outlived auto_background_after_sec and became a job."
    )
    job_id: str | None = Field(description="The job to follow with terminal_job_logs.")
    shell_kind: ShellKindField | None = Field(
        description="What ran the command: bash, sh, powershell, cmd, or direct (no shell); "
        "null when the call was refused before anything started (see error)."
    )
    auto_shell: bool = Field(
        description="True when shell syntax was detected and the command went through the "
        "shell although shell=false."
    )
    error: str | None = Field(None, description="Why nothing was started, and what to fix.")
    blocked: bool = Field(False, description=BLOCKED)
    cwd: str | None = Field(None, description="Working directory the command ran in.")
    stdout_bytes: int = Field(
        0,
        description="Raw bytes written to stdout so far: where terminal_job_logs continues "
        "for an auto-backgrounded command.",
    )
    stderr_bytes: int = Field(0, description="Raw bytes written to stderr so far.")
    output_dropped_bytes: int = Field(
        0, description="Bytes of output that were not kept anywhere (past the retention caps)."
    )
    notes: list[str] = Field(
        default_factory=list, description="Remarks from the server (binary output, ...)."
    )
    ended_jobs: list[EndedJob] = ended_jobs_field()


class OutputMatch(Result):
    line: int = Field(description="1-based line number in the stream.")
    text: str
    before: list[str] = Field(default_factory=list)
    after: list[str] = Field(default_factory=list)


class OutputPage(Result):
    output_handle: str
    stream: Literal["stdout", "stderr"]
    data: str = Field(description="Text of this page (empty with pattern).")
    offset: int = Field(description="Byte offset where data starts.")
    next_offset: int = Field(description="Pass as since_offset to continue.")
    eof: bool = Field(description="True when next_offset is the end of the stream.")
    expired: bool = Field(description="True when the handle is unknown, expired or evicted.")
    total_bytes: int = Field(description="Size of the stored stream in bytes.")
    other_stream_bytes: int = Field(
        0,
        description="Size of the handle's other stream (stderr when reading stdout, and the "
        "reverse): > 0 means read it too with stream=.",
    )
    truncated_bytes_dropped: int = Field(0, description="Bytes skipped because they were not kept.")
    matches: list[OutputMatch] | None = Field(
        None, description="Matching lines when `pattern` was given."
    )
    truncated: Literal["timeout", "max_matches", "max_bytes"] | None = Field(
        None,
        description="With pattern: why the search stopped before the end of the stream "
        "(continue from next_offset); null when it searched to the end.",
    )
    message: str | None = None
    ended_jobs: list[EndedJob] = ended_jobs_field()


class JobLogs(Result):
    job_id: str
    name: str | None
    stream: Literal["stdout", "stderr", "merged"]
    data: str = Field(description="Output text from offset to next_offset.")
    offset: int = Field(description="Byte offset where data starts.")
    next_offset: int = Field(
        description="Pass as since_offset next time (never splits a UTF-8 character)."
    )
    eof: bool = Field(description="The job has exited and every byte has been read.")
    status: JobStatus = Field(description=STATUS_DOC)
    end_reason: EndReason | None = Field(description=END_REASON_DOC)
    exit_code: int | None
    runtime_ms: int
    truncated_bytes_dropped: int = Field(
        description="Bytes between since_offset and offset that were not kept (the reader "
        "fell behind the retention caps)."
    )
    timed_out: bool
    semantic_status: SemanticStatus | None = Field(description="Set once the job has exited.")
    semantic_message: str | None
    total_bytes: int = Field(description="Bytes the stream has produced so far.")
    matched: bool | None = Field(None, description="With wait_for: whether the pattern matched.")
    match: str | None = Field(None, description="The text that matched wait_for.")
    waited_ms: int = Field(0, description="Time spent waiting server-side.")
    notes: list[str] = Field(default_factory=list)
    ended_jobs: list[EndedJob] = ended_jobs_field()


class JobInfo(Result):
    job_id: str
    name: str | None
    command: str
    cwd: str
    pid: int
    status: JobStatus = Field(description=STATUS_DOC)
    end_reason: EndReason | None = Field(description=END_REASON_DOC)
    exit_code: int | None
    semantic_status: SemanticStatus | None
    semantic_message: str | None
    started_at: str
    ended_at: str | None
    runtime_ms: int
    stdout_bytes: int
    stderr_bytes: int
    merged: bool
    auto_backgrounded: bool
    timed_out: bool
    last_line: str | None = Field(description="Last non-empty line of output.")


class JobDetail(JobInfo):
    """A job as the resource terminal://jobs/{job_id} shows it."""

    stdout_tail: str = Field(description="The last 4 KiB of stdout (all of it if shorter).")
    stderr_tail: str = Field(description="The last 4 KiB of stderr (empty when merged).")


class JobStarted(Result):
    job_id: str | None = Field(description="The new job; null when blocked.")
    pid: int | None
    name: str | None
    started_at: str | None
    merged: bool = Field(description="stderr is merged into stdout (read stream 'stdout').")
    argv: list[str] = Field(description="The command as it runs.")
    shell_kind: ShellKindField | None
    auto_shell: bool
    cwd: str | None
    warning: str | None
    timeout_sec: float | None = Field(description="Deadline from start; null = none.")
    blocked: bool = Field(False, description=BLOCKED)
    error: str | None = Field(None, description=REFUSAL)
    ended_jobs: list[EndedJob] = ended_jobs_field()

    @classmethod
    def refused(cls, reason: str, *, name: str | None, cwd: str | None) -> JobStarted:
        return cls(
            job_id=None,
            pid=None,
            name=name,
            started_at=None,
            merged=False,
            argv=[],
            shell_kind=None,
            auto_shell=False,
            cwd=cwd,
            warning=None,
            timeout_sec=None,
            blocked=True,
            error=reason,
        )


class JobManaged(Result):
    action: str
    ok: bool = Field(
        description="The action did what was asked (a failed action is an error result)."
    )
    job_id: str | None = None
    delivered: bool | None = Field(None, description="The signal reached the process group.")
    signal: str | None = None
    status: JobStatus | None = Field(None, description=STATUS_DOC)
    end_reason: EndReason | None = Field(None, description=END_REASON_DOC)
    exit_code: int | None = None
    exited: bool | None = Field(None, description="The job has exited (after a short grace).")
    bytes_written: int | None = None
    jobs: list[JobInfo] | None = None
    message: str | None = None
    ended_jobs: list[EndedJob] = ended_jobs_field()


class SearchMatch(Result):
    path: str = Field(description="File path, relative to the search root when under it.")
    line: int = Field(description="1-based line number.")
    text: str = Field(description="The matching line (long lines clipped with a marker).")
    before: list[str] = Field(
        default_factory=list, description="Context lines before (present only when there are some)."
    )
    after: list[str] = Field(
        default_factory=list, description="Context lines after (present only when there are some)."
    )


class FileCount(Result):
    path: str
    count: int = Field(description="Matching lines in this file (among those returned).")


class SearchResult(Result):
    matches: list[SearchMatch] = Field(description="Matching lines, by path, then line.")
    files: list[str] = Field(description="Files with a match, by path (files_with_matches only).")
    total: int = Field(description="Matches (or files) returned.")
    files_searched: int | None = Field(
        description="Files searched; null when the search stopped early."
    )
    files_matched: int | None = Field(description="Files with at least one match.")
    truncated: str | None = Field(
        description="Why results stop early: max_results, max_bytes or timeout; null = complete."
    )
    errors_count: int = Field(
        description="Unreadable files or directories (e.g. permission denied); not fatal."
    )
    errors: list[str] = Field(description="The first few of those errors.")
    skipped_binary: int = Field(description="Binary files skipped.")
    elapsed_ms: int
    engine: Literal["ripgrep", "python"]
    root: str = Field(description="The directory (or file) searched.")
    counts: list[FileCount] | None = Field(
        None,
        description="With extra_args=['-c']: matching lines per file, by path, counted from "
        "the matches returned (a lower bound when truncated is set).",
    )
    ended_jobs: list[EndedJob] = ended_jobs_field()


class GlobResult(Result):
    paths: list[str] = Field(
        description="Matching files relative to root, most recently "
        "modified first (sort=mtime) or by path."
    )
    count: int = Field(description="Files that matched (before max_results).")
    truncated: str | None = Field(
        description="max_results, timeout or scan_limit when not all are listed."
    )
    timed_out: bool = Field(
        description="The walk passed its deadline: paths holds what it found until then."
    )
    expanded_pattern: str = Field(
        description="The glob that ran (bare stems widen to **/*stem*, names match at any depth)."
    )
    root: str
    sort: Literal["mtime", "path"]
    engine: Literal["ripgrep", "python"]
    elapsed_ms: int
    ended_jobs: list[EndedJob] = ended_jobs_field()


class PtyOpened(Result):
    session_id: str | None = Field(description="The new session; null when blocked.")
    pid: int | None
    shell: str | None
    cwd: str | None
    cols: int
    rows: int
    idle_timeout_sec: float | None = Field(description="The session closes after this long unused.")
    blocked: bool = Field(False, description=BLOCKED)
    error: str | None = Field(None, description=REFUSAL)
    ended_jobs: list[EndedJob] = ended_jobs_field()

    @classmethod
    def refused(cls, reason: str, *, cwd: str | None, cols: int, rows: int) -> PtyOpened:
        return cls(
            session_id=None,
            pid=None,
            shell=None,
            cwd=cwd,
            cols=cols,
            rows=rows,
            idle_timeout_sec=None,
            blocked=True,
            error=reason,
        )


class PtyRunResult(Result):
    session_id: str
    output: str = Field(
        description="Output of this call only: no echoed command, no "
        "prompt, no completion marker; escapes and \\r redraws cleaned "
        "unless raw."
    )
    output_truncated_bytes: int = Field(
        0, description="Bytes cut from the middle of a very long output."
    )
    exit_code: int | None = Field(
        description="Exit status of the command that finished (null while it runs)."
    )
    semantic_status: SemanticStatus | None = None
    semantic_message: str | None = None
    cwd: str = Field(description="The shell's working directory after the command.")
    timed_out: bool = Field(
        description="The wait ended before the command (or expect) did; the command keeps running."
    )
    running: bool = Field(description="A command is still running in the session.")
    prompt_after: bool = Field(
        description="The shell's prompt came back: no command is running (the opposite of running)."
    )
    bytes_sent: int | None = Field(
        None, description="raw_send: bytes written to the terminal (after {Key} names)."
    )
    busy: bool = Field(False, description="Refused: another command is running (see message).")
    blocked: bool = Field(False, description=BLOCKED)
    error: str | None = Field(
        None,
        description="Why the call was refused: the policy's reason (blocked=true), or "
        "'session busy: ...' with what to do (busy=true).",
    )
    more: bool = Field(False, description="read_only: output was still arriving.")
    matched: bool | None = Field(None, description="expect: whether the pattern matched.")
    match: str | None = Field(None, description="expect: the text that matched.")
    screen: str | None = Field(None, description="The rendered screen (screen=true).")
    cursor: list[int] | None = Field(None, description="Cursor [row, column], 1-based.")
    cols: int
    rows: int
    next_offset: int = Field(description="Byte offset of the session's output read so far.")
    warning: str | None = None
    message: str | None = None
    ended_jobs: list[EndedJob] = ended_jobs_field()


class PtyClosed(Result):
    session_id: str
    output: str = Field(description="Output since the last read.")
    exit_code: int | None = Field(description="The shell's exit status (negative: signal).")
    message: str | None = None
    ended_jobs: list[EndedJob] = ended_jobs_field()
