"""Command analysis: one parse of a command string with a real bash grammar.

The parse (tree-sitter-bash) feeds three consumers:

* routing: can the command be executed directly as ``program args...``, or does it need
  bash (pipes, lists, redirections, expansions, globs, builtins, ...)?
* semantic exits: which simple commands may decide the exit status;
* warnings (and, later, policy): every simple command in command position, including
  those inside substitutions and behind wrappers such as ``sudo`` or ``xargs``.

The analysis never raises: any string yields an :class:`Analysis`.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import re
import shlex
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import tree_sitter_bash
from tree_sitter import Language, Node, Parser, Tree

# Builtins and keywords that have no meaningful standalone executable: a command that
# starts with one of these must run inside bash.
SHELL_ONLY = frozenset(
    [
        ".",
        ":",
        "alias",
        "bg",
        "bind",
        "break",
        "builtin",
        "caller",
        "cd",
        "command",
        "compgen",
        "complete",
        "compopt",
        "continue",
        "declare",
        "dirs",
        "disown",
        "enable",
        "eval",
        "exec",
        "exit",
        "export",
        "fc",
        "fg",
        "getopts",
        "hash",
        "help",
        "history",
        "jobs",
        "let",
        "local",
        "logout",
        "mapfile",
        "popd",
        "pushd",
        "read",
        "readarray",
        "readonly",
        "return",
        "set",
        "shift",
        "shopt",
        "source",
        "suspend",
        "time",
        "times",
        "trap",
        "type",
        "typeset",
        "ulimit",
        "umask",
        "unalias",
        "unset",
        "wait",
        "if",
        "then",
        "else",
        "elif",
        "fi",
        "case",
        "esac",
        "for",
        "while",
        "until",
        "do",
        "done",
        "function",
        "select",
        "coproc",
        "{",
        "}",
        "!",
        "[[",
        "]]",
    ]
)

# Argument node types whose text is a literal (possibly quoted) word.
_LITERAL_TYPES = frozenset(
    {"word", "raw_string", "number", "string", "concatenation", "ansi_c_string"}
)
_GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True)
class SimpleCommand:
    """One simple command as written: its words with quotes removed where possible."""

    words: tuple[str, ...]
    # False when the program name comes from an expansion (``$(echo rm)``, ``$X``).
    name_is_literal: bool = True
    assignments: tuple[str, ...] = ()
    # ``>`` / ``>>`` targets when the command has output redirections.
    redirect_targets: tuple[tuple[str, str], ...] = ()
    # Per word: True when it is a literal (no expansion or substitution); empty = unknown.
    plain: tuple[bool, ...] = ()
    # Where standard input comes from when the command redirects or pipes it:
    # ("pipe", None), ("herestring", text), ("heredoc", text), ("file", path), ("fd", None);
    # the text or path is None when it is not literal. None: inherited from the caller.
    stdin: tuple[str, str | None] | None = None
    # The words as bash passes them after brace expansion, with per-word literalness
    # (empty: the same as words/plain).
    expanded: tuple[tuple[str, bool], ...] = ()

    def is_plain(self, index: int) -> bool:
        return self.plain[index] if index < len(self.plain) else True

    @property
    def name(self) -> str:
        return self.words[0] if self.words else ""

    @property
    def program(self) -> str:
        """Basename of the program, lower-cased, without a Windows ``.exe``."""
        base = self.name.replace("\\", "/").rsplit("/", 1)[-1].lower()
        return base[:-4] if base.endswith(".exe") else base

    @property
    def args(self) -> tuple[str, ...]:
        return self.words[1:]

    def resolved(self) -> SimpleCommand:
        """The command with its words as bash passes them (braces expanded, ANSI-C
        strings decoded); the policy matches this form."""
        if not self.expanded:
            return self
        words = tuple(w for w, _ in self.expanded)
        plain = tuple(p for _, p in self.expanded)
        return dataclasses.replace(
            self, words=words, plain=plain, name_is_literal=plain[0], expanded=()
        )


@dataclass(frozen=True)
class Assignment:
    """``NAME=value`` (a prefix, a statement, or an argument of export/declare/...)."""

    name: str
    value: str | None  # None when the value is not literal


@dataclass(frozen=True)
class Analysis:
    source: str
    error: str | None = None
    needs_shell: bool = False
    reasons: tuple[str, ...] = ()
    argv: tuple[str, ...] | None = None
    commands: tuple[SimpleCommand, ...] = ()
    # Commands whose status may become the exit status of the whole string.
    deciders: tuple[SimpleCommand, ...] = ()
    pipefail: bool = False
    # False when the exit status is known not to come from a plain command
    # (``! cmd``, a loop, a backgrounded last command).
    decidable: bool = True
    background_last: bool = False
    parse_ok: bool = True
    # Every variable assignment anywhere in the command (for the policy).
    assignments: tuple[Assignment, ...] = ()


# The bytes being analysed (node texts are sliced from them).
_SOURCE: contextvars.ContextVar[bytes] = contextvars.ContextVar("analysis_source", default=b"")


_LANGUAGE = Language(tree_sitter_bash.language())
# A tree-sitter Parser is not safe to share between threads, and large commands are
# analysed in worker threads: one parser per thread.
_PARSERS = threading.local()

# Some inputs make tree-sitter-bash's parse quadratic (40,000 `)` take 15 s), and the C
# parse holds the GIL, so a worker thread alone does not keep other calls answering.
# Above a few KiB the parse reads through a callback and reports progress; the progress
# callback lets other threads run and cancels the parse past the budget.
_WATCHED_PARSE_BYTES = 2048
PARSE_BUDGET_SEC = 2.0


def _parser() -> Parser:
    parser: Parser | None = getattr(_PARSERS, "parser", None)
    if parser is None:
        parser = _PARSERS.parser = Parser(_LANGUAGE)
    return parser


def _parse(data: bytes) -> Tree | None:
    """The syntax tree, or None when the parse ran past PARSE_BUDGET_SEC."""
    if len(data) <= _WATCHED_PARSE_BYTES:
        return _parser().parse(data)
    deadline = time.monotonic() + PARSE_BUDGET_SEC
    try:
        return _parser().parse(
            lambda offset, _point: data[offset : offset + 65536],
            progress_callback=lambda *_state: time.monotonic() > deadline,
        )
    except ValueError:  # "Parsing failed": the callback cancelled it
        return None


@functools.lru_cache(maxsize=512)
def analyze(command: str) -> Analysis:
    """Analyse ``command``; pure, so results are cached (agents repeat commands often)."""
    try:
        return _analyze(command)
    except Exception as exc:  # never let a parser surprise break a tool call
        return Analysis(
            source=command, needs_shell=True, reasons=(f"analysis failed: {exc}",), parse_ok=False
        )


def join_continuations(command: str) -> str:
    """``command`` with bash's line continuations (backslash-newline outside single
    quotes) removed, as bash removes them before splitting words: ``r\\<newline>m`` is
    ``rm``. The parser would take the continuation for a space between two words."""
    out: list[str] = []
    i = 0
    n = len(command)
    quote: str | None = None
    while i < n:
        c = command[i]
        if quote == "'":
            out.append(c)
            if c == "'":
                quote = None
            i += 1
            continue
        if c == "\\" and i + 1 < n:
            if command[i + 1] == "\n":
                i += 2
                continue
            out.append(command[i : i + 2])
            i += 2
            continue
        if c == "'" and quote is None:
            # $'...' keeps its own escapes; like '...' it has no continuations.
            quote = "'"
        elif c == '"':
            quote = None if quote == '"' else '"'
        out.append(c)
        i += 1
    return "".join(out)


def _ascii_copy(source: bytes) -> bytes:
    """``source`` with every non-ASCII byte replaced by ``x``, byte for byte.

    The tree-sitter-bash scanner passes code points above 255 to C character-class
    functions, which corrupts memory: fuzzing crashed the interpreter within seconds.
    Non-ASCII characters only ever appear inside words and strings, where any letter
    parses the same, and offsets do not move, so node texts are read from the original.
    """
    if source.isascii():
        return source
    return source.translate(_TO_ASCII)


_TO_ASCII = bytes(range(128)) + b"x" * 128


def _analyze(command: str) -> Analysis:
    text = join_continuations(command) if "\\\n" in command else command
    source = text.encode("utf-8", errors="surrogateescape")
    token = _SOURCE.set(source)
    try:
        return _analyze_source(command, source)
    finally:
        _SOURCE.reset(token)


def _analyze_source(command: str, source: bytes) -> Analysis:
    tree = _parse(_ascii_copy(source))
    if tree is None:
        return Analysis(
            source=command,
            error=(
                f"command could not be analysed within {PARSE_BUDGET_SEC:g} s (deeply "
                "nested or repetitive syntax); put it in a script file and run the file"
            ),
            needs_shell=True,
            parse_ok=False,
        )
    root = tree.root_node
    if root.has_error:
        problem = unbalanced_quote(command)
        if problem:
            return Analysis(source=command, error=problem, needs_shell=True, parse_ok=False)
    walker = _Walker()
    walker.walk(root)
    deciders, decidable, background_last = _deciders(root, walker)
    reasons = list(walker.reasons)
    if root.has_error:
        reasons.append("bash syntax the analyser does not understand")
    argv = None
    if not reasons:
        argv = _direct_argv(command, walker)
        if argv is None:
            reasons.append("not a plain program with arguments")
    nested = tuple(analyze(text) for text in walker.inline_scripts)
    all_commands = tuple(walker.commands) + tuple(c for n in nested for c in n.commands)
    assignments = tuple(walker.assignments) + tuple(a for n in nested for a in n.assignments)
    return Analysis(
        source=command,
        needs_shell=bool(reasons),
        reasons=tuple(reasons),
        argv=argv,
        commands=all_commands,
        deciders=deciders,
        pipefail=walker.pipefail,
        decidable=decidable,
        background_last=background_last,
        parse_ok=not root.has_error,
        assignments=assignments,
    )


def _direct_argv(command: str, walker: _Walker) -> tuple[str, ...] | None:
    if len(walker.commands) != 1:
        return None
    try:
        argv = tuple(shlex.split(command, comments=False, posix=True))
    except ValueError:
        return None
    expected = walker.commands[0].words
    # shlex and bash agree on the simple forms routed here; this guards the assumption.
    return argv if argv == expected and argv else None


class _Walker:
    """Collects simple commands and the reasons a string needs a shell."""

    def __init__(self) -> None:
        self.commands: list[SimpleCommand] = []
        self.reasons: list[str] = []
        self.inline_scripts: list[str] = []
        self.assignments: list[Assignment] = []
        self.pipefail = False
        self.decider_nodes: dict[int, SimpleCommand] = {}
        # Where commands being walked read standard input from (innermost last).
        self._stdin: list[tuple[str, str | None]] = []

    def reason(self, why: str) -> None:
        if why not in self.reasons:
            self.reasons.append(why)

    def _with_stdin(self, source: tuple[str, str | None] | None, node: Node) -> None:
        if source is None:
            self.walk(node)
            return
        self._stdin.append(source)
        try:
            self.walk(node)
        finally:
            self._stdin.pop()

    def walk(self, node: Node) -> None:
        kind = node.type
        if kind == "program":
            statements = [c for c in node.named_children if c.type != "comment"]
            if len(statements) > 1:
                self.reason("several commands")
            if any(c.type == "comment" for c in node.named_children):
                self.reason("comment")
            if any(c.type in (";", "&") for c in node.children):
                self.reason("command separator")
            for child in node.named_children:
                self.walk(child)
        elif kind == "command":
            self._command(node)
        elif kind == "test_command":
            self.reason("test expression")
            words = tuple(_literal(c) for c in _leaves_for_test(node))
            opener = node.children[0].type if node.children else "["
            command = SimpleCommand(words=(opener, *words))
            self._record(node, command)
            self._descend_expansions(node)
        elif kind == "redirected_statement":
            self.reason("redirection")
            self._redirected(node)
        elif kind in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
            self.reason("redirection")
            self._redirect_children(node)
        elif kind == "pipeline":
            self.reason("pipe")
            for index, child in enumerate(node.named_children):
                self._with_stdin(("pipe", None) if index else None, child)
        elif kind == "list":
            self.reason("command list")
            for child in node.named_children:
                self.walk(child)
        elif kind == "variable_assignment":
            self.reason("variable assignment")
            self._assignment(node)
            self._descend_expansions(node)
        elif kind in ("declaration_command", "unset_command"):
            self.reason("shell builtin")
            words = tuple(_literal(c) for c in node.children if c.type not in ("comment",))
            for child in node.named_children:
                if child.type == "variable_assignment":
                    self._assignment(child)
            self._record(node, SimpleCommand(words=words))
            self._descend_expansions(node)
        elif kind in ("command_substitution", "process_substitution"):
            self.reason("command substitution")
            # ``>(cmd)`` feeds cmd from a pipe; ``<(cmd)`` and ``$(cmd)`` inherit stdin.
            piped = kind == "process_substitution" and _text(node).startswith(">(")
            for child in node.named_children:
                self._with_stdin(("pipe", None) if piped else None, child)
        elif kind == "comment":
            self.reason("comment")
        else:
            if kind not in ("ERROR",):
                self.reason(kind.replace("_", " "))
            for child in node.named_children:
                self.walk(child)

    def _assignment(self, node: Node) -> None:
        name_node = node.child_by_field_name("name")
        value_node = node.child_by_field_name("value")
        name = _text(name_node) if name_node is not None else _text(node).split("=", 1)[0]
        name = name.split("[", 1)[0].rstrip("+")
        value: str | None = ""
        if value_node is not None:
            value = _literal(value_node) if _is_plain(value_node) else None
        self.assignments.append(Assignment(name, value))

    def _command(self, node: Node) -> None:
        words: list[str] = []
        plain: list[bool] = []
        expanded: list[tuple[str, bool]] = []
        assignments: list[str] = []
        name_is_literal = True
        targets: list[tuple[str, str]] = []
        stdin: tuple[str, str | None] | None = None
        for child in node.named_children:
            kind = child.type
            if kind == "variable_assignment":
                self.reason("variable assignment")
                assignments.append(_text(child))
                self._assignment(child)
                self._descend_expansions(child)
            elif kind == "command_name":
                inner = child.named_children[0] if child.named_children else child
                if not _is_plain(inner):
                    name_is_literal = False
                    self.reason("expansion in command name")
                words.append(_literal(inner))
                plain.append(name_is_literal)
                expanded.extend(_word_values(inner))
                self._descend_expansions(inner)
            elif kind in ("file_redirect", "herestring_redirect", "heredoc_redirect"):
                self.reason("redirection")
                targets.extend(_redirect_targets(child))
                stdin = _stdin_of(child) or stdin
                for extra in _redirect_extras(child):
                    words.append(_literal(extra))
                    plain.append(_is_plain(extra))
                    expanded.extend(_word_values(extra))
                self._redirect_children(child)
            else:
                literal = _is_plain(child)
                if not literal:
                    self.reason(_why_not_plain(child))
                words.append(_literal(child))
                plain.append(literal or child.type == "word")
                expanded.extend(_word_values(child))
                self._descend_expansions(child)
        if words and words[0] in SHELL_ONLY:
            self.reason(f"shell builtin {words[0]}")
        if words and words[0] in _DECLARES:
            for index, word in enumerate(words[1:], 1):
                if "=" in word and not word.startswith(("-", "+")):
                    name, value = word.split("=", 1)
                    literal_value = value if index < len(plain) and plain[index] else None
                    self.assignments.append(
                        Assignment(name.split("[", 1)[0].rstrip("+"), literal_value)
                    )
        same = tuple(expanded) == tuple(zip(words, plain, strict=False))
        command = SimpleCommand(
            words=tuple(words),
            name_is_literal=name_is_literal,
            assignments=tuple(assignments),
            redirect_targets=tuple(targets),
            plain=tuple(plain),
            stdin=stdin or self._inherited_stdin(),
            expanded=() if same else tuple(expanded),
        )
        self._record(node, command)
        self._look_inside(command)

    def _inherited_stdin(self) -> tuple[str, str | None] | None:
        return self._stdin[-1] if self._stdin else None

    def _redirected(self, node: Node) -> None:
        redirects = [c for c in node.named_children if c.type.endswith("redirect")]
        targets = tuple(t for r in redirects for t in _redirect_targets(r))
        body = next((c for c in node.named_children if not c.type.endswith("redirect")), None)
        stdin = None
        for redirect in redirects:
            stdin = _stdin_of(redirect) or stdin
        extras = [e for r in redirects for e in _redirect_extras(r)]
        for redirect in redirects:
            self._redirect_children(redirect)
        if extras and (body is None or _is_fd_prefix(body, redirects)):
            # ``<in cmd args`` / ``0<in cmd``: the parser puts the command's words in the
            # redirection; they form the command.
            values = [v for e in extras for v in _word_values(e)]
            words = tuple(_literal(e) for e in extras)
            synthesized = SimpleCommand(
                words=words,
                name_is_literal=_is_plain(extras[0]),
                redirect_targets=targets,
                plain=tuple(_is_plain(e) for e in extras),
                stdin=stdin or self._inherited_stdin(),
                expanded=tuple(values),
            )
            self._record(node, synthesized)
            self._look_inside(synthesized)
            return
        if body is None:
            # A bare ``> file`` is an empty command whose only effect is the redirection.
            self._record(node, SimpleCommand(words=(":",), redirect_targets=targets))
            return
        self._with_stdin(stdin, body)
        command = self.decider_nodes.get(body.id)
        if command is not None and body.type == "command":
            updated = dataclasses.replace(
                command, redirect_targets=command.redirect_targets + targets
            )
            if extras:  # ``cmd >out more args``: the words after the target are arguments
                values = [v for e in extras for v in _word_values(e)]
                before = command.expanded or tuple(zip(command.words, command.plain, strict=False))
                updated = dataclasses.replace(
                    updated,
                    words=command.words + tuple(_literal(e) for e in extras),
                    plain=command.plain + tuple(_is_plain(e) for e in extras),
                    expanded=before + tuple(values),
                )
            self.commands[self.commands.index(command)] = updated
            self.decider_nodes[body.id] = updated
            self.decider_nodes[node.id] = updated

    def _redirect_children(self, redirect: Node) -> None:
        """Expansions in a redirection, and the commands the parser nests in a heredoc
        redirection (``cat <<EOF | sh`` and ``cat <<EOF && rm x`` put them there)."""
        for child in redirect.named_children:
            kind = child.type
            if kind in ("heredoc_start", "heredoc_end", "file_descriptor"):
                continue
            if redirect.type == "heredoc_redirect" and kind == "pipeline":
                self.reason("pipe")
                for member in child.named_children:
                    self._with_stdin(("pipe", None), member)
            elif (redirect.type == "heredoc_redirect" and kind in _STATEMENTS) or kind in (
                "command_substitution",
                "process_substitution",
            ):
                self.walk(child)
            else:
                self._descend_expansions(child)

    def _record(self, node: Node, command: SimpleCommand) -> None:
        self.commands.append(command)
        self.decider_nodes[node.id] = command
        if command.program == "set" and _sets_pipefail(command.args):
            self.pipefail = True

    def _look_inside(self, command: SimpleCommand) -> None:
        """Scripts given to ``bash -c`` are analysed too (for warnings and semantics)."""
        for inner in unwrap(command.resolved()):
            if is_shell(inner.program):
                given = shell_input(inner)
                if given.source == "argument" and given.script:
                    self.inline_scripts.append(given.script)

    def _descend_expansions(self, node: Node) -> None:
        for child in node.named_children:
            if child.type in ("command_substitution", "process_substitution"):
                self.walk(child)
            else:
                self._descend_expansions(child)


_STATEMENTS = frozenset(
    [
        "command",
        "list",
        "pipeline",
        "redirected_statement",
        "subshell",
        "compound_statement",
        "if_statement",
        "while_statement",
        "for_statement",
        "case_statement",
        "function_definition",
        "negated_command",
        "test_command",
        "declaration_command",
        "variable_assignment",
    ]
)
_DECLARES = frozenset(["export", "declare", "typeset", "local", "readonly"])


def _deciders(root: Node, walker: _Walker) -> tuple[tuple[SimpleCommand, ...], bool, bool]:
    """Commands whose exit status can become the status of the whole string."""
    statements = [c for c in root.named_children if c.type != "comment"]
    if not statements:
        return (), True, False
    background_last = bool(root.children) and root.children[-1].type == "&"
    if background_last:
        return (), False, True
    found: list[SimpleCommand] = []
    decidable = _collect_last(statements[-1], walker, found)
    return tuple(found), decidable, False


def _collect_last(node: Node, walker: _Walker, found: list[SimpleCommand]) -> bool:
    kind = node.type
    if kind in ("command", "test_command", "declaration_command", "unset_command"):
        command = walker.decider_nodes.get(node.id)
        if command is not None:
            found.append(command)
        return True
    if kind == "redirected_statement":
        body = node.named_children[0] if node.named_children else None
        return body is not None and _collect_last(body, walker, found)
    if kind == "list":
        last = node.named_children[-1] if node.named_children else None
        return last is not None and _collect_last(last, walker, found)
    if kind == "pipeline":
        members = [c for c in node.named_children]
        if walker.pipefail:
            ok = True
            for member in members:
                ok = _collect_last(member, walker, found) and ok
            return ok
        return bool(members) and _collect_last(members[-1], walker, found)
    if kind in ("subshell", "compound_statement"):
        inner = [c for c in node.named_children if c.type != "comment"]
        return bool(inner) and _collect_last(inner[-1], walker, found)
    return False


SHELLS = frozenset(
    [
        "sh",
        "bash",
        "rbash",
        "dash",
        "zsh",
        "ksh",
        "ksh93",
        "mksh",
        "lksh",
        "oksh",
        "pdksh",
        "ash",
        "yash",
        "posh",
        "fish",
        "csh",
        "tcsh",
    ]
)
_VERSIONED_SHELL = re.compile(r"(?:ba|z|k|da)?sh-?[0-9][0-9.]*")
# Paths that read the caller's standard input when a shell opens them as its script.
_STDIN_PATHS = re.compile(r"(?:-|/dev/stdin|/dev/fd/0|/proc/(?:self|thread-self|\d+)/fd/0)")


def is_shell(program: str) -> bool:
    return program in SHELLS or _VERSIONED_SHELL.fullmatch(program) is not None


def reads_stdin_path(path: str) -> bool:
    """True for a file name that is the caller's standard input."""
    return bool(_STDIN_PATHS.fullmatch(path))


def is_descriptor_path(path: str) -> bool:
    """True for a file name that is an open descriptor (``/dev/fd/3`` is a pipe, a
    here-string or a process substitution) rather than a file on disk."""
    return path.startswith(("/dev/fd/", "/proc/", "/dev/std"))


@dataclass(frozen=True)
class ShellInput:
    """Where a shell invocation reads its commands from."""

    # "argument" (-c), "file" (a script operand), "stdin" (no operand, or -s)
    source: str
    script: str | None = None  # -c text; None when not literal or missing
    path: str | None = None  # the script operand; None when not literal
    interactive: bool = False  # -i given
    # --rcfile / --init-file values (None: not literal)
    rcfiles: tuple[str | None, ...] = ()


def shell_input(command: SimpleCommand) -> ShellInput:
    """Parse a shell's options the way bash does: clusters (``-ec``, ``-xc``), ``-o``/
    ``-O`` values, ``--rcfile FILE``, ``--`` and ``-`` ending options; the first operand
    is the ``-c`` script or the script file."""
    args = command.args
    command_mode = stdin_mode = interactive = False
    rcfiles: list[str | None] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("--", "-"):
            i += 1
            break
        if arg in ("--rcfile", "--init-file", "--init-command", "-C"):
            if i + 1 < len(args):
                rcfiles.append(args[i + 1] if command.is_plain(i + 2) else None)
            i += 2
            continue
        if arg.startswith("--"):
            name, _, value = arg.partition("=")
            if name in ("--command", "--rcfile", "--init-file", "--init-command"):
                if name == "--command":
                    command_mode = True
                    if value:
                        return ShellInput("argument", value if command.is_plain(i + 1) else None)
                else:
                    rcfiles.append(value if command.is_plain(i + 1) else None)
            i += 1
            continue
        if len(arg) > 1 and arg[0] in "-+" and command.is_plain(i + 1):
            flags = arg[1:]
            i += 1
            for flag in flags:
                if flag in "oO":
                    i += 1  # -o NAME / -O NAME take the next word
                elif flag == "c":
                    command_mode = True
                elif flag == "s":
                    stdin_mode = True
                elif flag == "i":
                    interactive = True
            continue
        break
    operands = args[i:]
    if command_mode:
        if not operands:
            return ShellInput("argument", None, interactive=interactive, rcfiles=tuple(rcfiles))
        script = operands[0] if command.is_plain(i + 1) else None
        return ShellInput("argument", script, interactive=interactive, rcfiles=tuple(rcfiles))
    if operands and not stdin_mode:
        path = operands[0] if command.is_plain(i + 1) else None
        return ShellInput("file", path=path, interactive=interactive, rcfiles=tuple(rcfiles))
    return ShellInput("stdin", interactive=interactive, rcfiles=tuple(rcfiles))


# How many wrappers (env, nice, sudo, timeout, xargs ...) are looked through; a command
# wrapped deeper than this is treated as unknowable by the policy.
MAX_WRAPPERS = 16


def unwrap(command: SimpleCommand) -> list[SimpleCommand]:
    """The command itself and the commands it runs through known wrappers.

    ``sudo -u x env A=1 nice -n 5 rm -rf /`` yields the whole command and ``rm -rf /``;
    ``find . -exec rm {} ;`` yields the find and the ``rm {}``; ``xargs rm`` yields
    ``rm``. The last element is the innermost command.
    """
    out = [command]
    current = command
    for _ in range(MAX_WRAPPERS):  # wrappers nest rarely; bound the work
        inner = _strip_wrapper(current)
        if inner is None:
            break
        out.append(inner)
        current = inner
    for item in list(out):
        if item.program in ("find",):
            out.extend(_find_exec(item))
    return out


def wraps_further(command: SimpleCommand) -> bool:
    """Whether ``command`` is itself a wrapper of another (past MAX_WRAPPERS levels, what
    finally runs is not known)."""
    return _strip_wrapper(command) is not None


def innermost(command: SimpleCommand) -> SimpleCommand:
    result = command
    for _ in range(MAX_WRAPPERS):
        inner = _strip_wrapper(result)
        if inner is None:
            return result
        result = inner
    return result


# Options of wrapper programs that take a separate value.
_WRAPPER_VALUE_OPTIONS: dict[str, frozenset[str]] = {
    "sudo": frozenset(
        [
            "-u",
            "-g",
            "-h",
            "-p",
            "-C",
            "-D",
            "-r",
            "-t",
            "-U",
            "-T",
            "--user",
            "--group",
            "--host",
            "--prompt",
        ]
    ),
    "doas": frozenset(["-u", "-C"]),
    "env": frozenset(["-u", "-C", "-S", "--unset", "--chdir", "--split-string"]),
    "time": frozenset(["-f", "-o", "--format", "--output"]),
    "timeout": frozenset(["-s", "-k", "--signal", "--kill-after"]),
    "nice": frozenset(["-n", "--adjustment"]),
    "ionice": frozenset(["-c", "-n", "-p", "-t"]),
    "stdbuf": frozenset(["-i", "-o", "-e"]),
    "xargs": frozenset(
        [
            "-I",
            "-n",
            "-P",
            "-d",
            "-L",
            "-s",
            "-a",
            "-E",
            "-e",
            "-i",
            "-l",
            "--max-args",
            "--max-procs",
            "--delimiter",
            "--arg-file",
            "--max-lines",
            "--max-chars",
            "--replace",
        ]
    ),
    "command": frozenset(),
    "nohup": frozenset(),
    "exec": frozenset(["-a"]),
    "builtin": frozenset(),
    "unbuffer": frozenset(),
    "chronic": frozenset(),
    "caffeinate": frozenset(),
    "busybox": frozenset(),
    "toybox": frozenset(),
    "setsid": frozenset(),
    "flock": frozenset(["-w", "--timeout", "-E", "--conflict-exit-code"]),
    "taskset": frozenset(),
    "chrt": frozenset(["-T", "-P", "-D", "--sched-runtime", "--sched-period", "--sched-deadline"]),
    "unshare": frozenset(
        [
            "-S",
            "-G",
            "-R",
            "-w",
            "--setuid",
            "--setgid",
            "--root",
            "--wd",
            "--map-user",
            "--map-group",
            "--map-users",
            "--map-groups",
            "--propagation",
            "--setgroups",
        ]
    ),
    "nsenter": frozenset(["-t", "--target", "-S", "--setuid", "-G", "--setgid"]),
    "chroot": frozenset(["--userspec", "--groups"]),
    "prlimit": frozenset(["-p", "--pid"]),
    "setpriv": frozenset(
        [
            "--reuid",
            "--regid",
            "--ruid",
            "--rgid",
            "--euid",
            "--egid",
            "--groups",
            "--inh-caps",
            "--ambient-caps",
            "--bounding-set",
            "--securebits",
            "--pdeathsig",
            "--selinux-label",
            "--apparmor-profile",
            "--landlock-access",
            "--landlock-rule",
        ]
    ),
    "strace": frozenset(
        ["-e", "-o", "-p", "-s", "-u", "-E", "-a", "-b", "-I", "-O", "-S", "-P", "-X"]
    ),
    "ltrace": frozenset(["-e", "-o", "-p", "-s", "-u", "-a", "-n", "-A", "-D", "-F", "-l", "-x"]),
    "eatmydata": frozenset(),
    "fakeroot": frozenset(["-l", "-s", "-i", "--lib", "--faked"]),
    "faketime": frozenset(["-m", "-f"]),
    "sg": frozenset(),
    "dbus-run-session": frozenset(["--config-file", "--dbus-daemon"]),
    "xvfb-run": frozenset(["-n", "-s", "-e", "-f", "-p", "--server-num", "--server-args"]),
    "torsocks": frozenset(["-u", "-p", "-a", "-P"]),
    "proxychains": frozenset(["-f"]),
    "proxychains4": frozenset(["-f"]),
    "systemd-run": frozenset(["-u", "--unit", "-p", "--property", "-E", "--setenv", "-M"]),
    "firejail": frozenset(),
    "pkexec": frozenset(["--user"]),
    "runcon": frozenset(["-u", "-r", "-t", "-l"]),
    "numactl": frozenset(["-C", "-N", "-m", "-p", "-i"]),
    "cpulimit": frozenset(["-l", "-p", "-e"]),
    "catchsegv": frozenset(),
}
# Wrappers whose first positional arguments are not the command (timeout DURATION cmd).
_WRAPPER_POSITIONAL = {
    "timeout": 1,
    "flock": 1,
    "taskset": 1,
    "chrt": 1,
    "chroot": 1,
    "faketime": 1,
    "sg": 1,
}


def _strip_wrapper(command: SimpleCommand) -> SimpleCommand | None:
    program = command.program
    special = _SPECIAL_WRAPPERS.get(program)
    if special is not None:
        return special(command)
    if program not in _WRAPPER_VALUE_OPTIONS:
        return None
    if program == "command" and any(a in ("-v", "-V") for a in command.args):
        return None  # a lookup, not an execution
    i = _wrapped_start(command)
    if program == "env":
        split = _env_split_string(command, i)
        if split is not None:
            return split
    if program == "flock" and i < len(command.args) and command.args[i] in ("-c", "--command"):
        return _shell_of(command, i + 1)
    interactive = any(a in ("-s", "-i", "--shell", "--login") for a in command.args)
    if program in ("sudo", "doas") and i >= len(command.args) and interactive:
        return _SHELL_READING_INPUT  # sudo -s / sudo -i: an interactive shell
    if program in _SHELL_IF_NO_COMMAND and i >= len(command.args):
        return _SHELL_READING_INPUT
    if program == "sg":
        return _shell_of_joined(command, i)
    return _tail(command, i)


def _wrapped_start(command: SimpleCommand) -> int:
    """Index in ``args`` where the wrapped command starts."""
    program = command.program
    value_options = _WRAPPER_VALUE_OPTIONS.get(program, frozenset())
    args = command.args
    i = 0
    skip_positional = _WRAPPER_POSITIONAL.get(program, 0)
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if program == "env" and "=" in arg and not arg.startswith("-"):
            i += 1
            continue
        if arg.startswith("-") and len(arg) > 1:
            if program == "flock" and arg in ("-c", "--command") and not skip_positional:
                break
            i += 1
            if arg in value_options and "=" not in arg:
                i += 1
            continue
        if skip_positional:
            skip_positional -= 1
            i += 1
            continue
        break
    while skip_positional and i < len(args):
        skip_positional -= 1
        i += 1
    return i


def _tail(command: SimpleCommand, i: int) -> SimpleCommand | None:
    rest = tuple(command.args[i:])
    if not rest:
        return None
    plain = command.plain[i + 1 :]
    return SimpleCommand(words=rest, name_is_literal=plain[0] if plain else True, plain=plain)


def _shell_of(command: SimpleCommand, index: int) -> SimpleCommand:
    """``sh -c SCRIPT`` for a wrapper that hands ``args[index]`` to a shell."""
    args = command.args
    script = args[index] if index < len(args) else ""
    plain = command.is_plain(index + 1) if index < len(args) else False
    return SimpleCommand(words=("sh", "-c", script), plain=(True, True, plain))


def _shell_of_joined(command: SimpleCommand, index: int) -> SimpleCommand | None:
    """``sh -c 'ARGS...'`` for a wrapper whose remaining arguments are joined into one
    shell command line (``ssh host cmd args``, ``sg group cmd``)."""
    args = command.args[index:]
    if not args:
        return None
    plain = all(command.is_plain(index + 1 + k) for k in range(len(args)))
    return SimpleCommand(words=("sh", "-c", " ".join(args)), plain=(True, True, plain))


# A shell that reads its commands from its standard input (the terminal, in a PTY).
_SHELL_READING_INPUT = SimpleCommand(words=("sh",))
# Wrappers that start the user's shell when no command is given.
_SHELL_IF_NO_COMMAND = frozenset(["unshare", "nsenter", "chroot"])


def _env_split_string(command: SimpleCommand, start: int) -> SimpleCommand | None:
    """``env -S 'cmd args'`` / ``--split-string=...``: the string is split into words
    that come before the remaining arguments."""
    args = command.args
    for i, arg in enumerate(args[:start]):
        value: str | None = None
        if arg in ("-S", "--split-string") and i + 1 < len(args):
            value, plain = args[i + 1], command.is_plain(i + 2)
        elif arg.startswith("--split-string="):
            value, plain = arg.split("=", 1)[1], command.is_plain(i + 1)
        elif arg.startswith("-S") and len(arg) > 2:
            value, plain = arg[2:], command.is_plain(i + 1)
        if value is not None:
            rest = " ".join(args[start:])
            script = (value + " " + rest).strip()
            literal = plain and all(command.is_plain(k + 1) for k in range(start, len(args)))
            return SimpleCommand(words=("sh", "-c", script), plain=(True, True, literal))
    return None


def _option_value(command: SimpleCommand, names: tuple[str, ...]) -> int | None:
    """Index in ``args`` of the value of the first of ``names`` (``-c X``, ``--command=X``
    counts as the same index with the value after ``=``)."""
    for i, arg in enumerate(command.args):
        if arg in names:
            return i + 1
    return None


def _user_shell_wrapper(command: SimpleCommand) -> SimpleCommand | None:
    """``su``/``runuser``/``script``: ``-c CMD`` runs CMD with a shell; without it, an
    interactive shell starts."""
    args = command.args
    for i, arg in enumerate(args):
        if arg in ("-c", "--command", "--session-command"):
            return _shell_of(command, i + 1)
        if arg.startswith("-") and not arg.startswith("--") and "c" in arg[1:]:
            value = arg[arg.index("c", 1) + 1 :]  # -qc CMD, or -cCMD
            if not value:
                return _shell_of(command, i + 1)
            return SimpleCommand(
                words=("sh", "-c", value), plain=(True, True, command.is_plain(i + 1))
            )
        for long in ("--command=", "--session-command="):
            if arg.startswith(long):
                value = arg[len(long) :]
                return SimpleCommand(
                    words=("sh", "-c", value), plain=(True, True, command.is_plain(i + 1))
                )
    if command.program == "script" and any(a in ("-h", "--help", "-V") for a in args):
        return None
    return _SHELL_READING_INPUT


def _ssh(command: SimpleCommand) -> SimpleCommand | None:
    """``ssh [options] host [command...]``: the command runs in a remote shell; without
    one, an interactive remote shell starts."""
    args = command.args
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if arg.startswith("-") and len(arg) > 1:
            i += 1
            if arg[-1] in "BbcDEeFIiJLlmOoPpQRSWw" and len(arg) == 2:
                i += 1
            continue
        break
    if i >= len(args):
        return None
    if i + 1 >= len(args):
        return _SHELL_READING_INPUT
    return _shell_of_joined(command, i + 1)


def _coproc(command: SimpleCommand) -> SimpleCommand | None:
    """``coproc [NAME] command`` / ``coproc NAME { list; }``."""
    words = list(command.args)
    if len(words) >= 2 and words[1] in ("{", "("):
        words = words[1:]
    if not words:
        return None
    if words[0] in ("{", "("):
        body = words[1:]
        if body and body[-1] in ("}", ")"):
            body = body[:-1]
        return SimpleCommand(words=("sh", "-c", " ".join(body)), plain=(True, True, True))
    offset = len(command.args) - len(words)
    return _tail(command, offset)


_SPECIAL_WRAPPERS = {
    "su": _user_shell_wrapper,
    "runuser": _user_shell_wrapper,
    "script": _user_shell_wrapper,
    "ssh": _ssh,
    "coproc": _coproc,
}


def _find_exec(command: SimpleCommand) -> list[SimpleCommand]:
    found: list[SimpleCommand] = []
    args = command.args
    i = 0
    while i < len(args):
        if args[i] in ("-exec", "-execdir", "-ok", "-okdir"):
            j = i + 1
            while j < len(args) and args[j] not in (";", "+", "\\;"):
                j += 1
            if j > i + 1:
                found.append(SimpleCommand(words=tuple(args[i + 1 : j])))
            i = j
        i += 1
    return found


def _sets_pipefail(args: tuple[str, ...]) -> bool:
    return any(
        arg.startswith("-")
        and not arg.startswith("--")
        and "o" in arg[1:]
        and i + 1 < len(args)
        and args[i + 1] == "pipefail"
        for i, arg in enumerate(args)
    )


# -- node helpers ----------------------------------------------------------------------


def _text(node: Node) -> str:
    # From the original bytes: the parser saw an ASCII-only copy (see _ascii_copy).
    return _SOURCE.get()[node.start_byte : node.end_byte].decode("utf-8", "surrogateescape")


def _is_plain(node: Node) -> bool:
    """True when ``node`` is a literal word bash would pass through unchanged."""
    kind = node.type
    if kind not in _LITERAL_TYPES:
        return False
    if kind == "string":
        text = _text(node)
        return all(c.type == "string_content" or not c.is_named for c in node.children) and not (
            set(text) & set("$`\\")
        )
    if kind == "concatenation":
        # tree-sitter splits ``{a,b}`` into words; bash would expand it.
        text = _text(node)
        if "{" in text and ("," in text or ".." in text):
            return False
        return all(_is_plain(c) for c in node.named_children)
    if kind == "word":
        text = _text(node)
        if set(text) & _GLOB_CHARS or text.startswith("~") or "$" in text:
            return False
        return not ("{" in text and ("," in text or ".." in text))
    return True


def _why_not_plain(node: Node) -> str:
    kind = node.type
    if kind in ("simple_expansion", "expansion"):
        return "variable expansion"
    if kind in ("command_substitution", "process_substitution"):
        return "command substitution"
    if kind == "word":
        text = _text(node)
        if set(text) & _GLOB_CHARS:
            return "glob"
        if text.startswith("~"):
            return "tilde"
        return "brace expansion" if "{" in text else "special word"
    if kind in ("brace_expression", "concatenation"):
        return "brace expansion" if "{" in _text(node) else "expansion in word"
    if kind == "string":
        return "expansion or escape in a double-quoted string"
    return kind.replace("_", " ")


def _literal(node: Node) -> str:
    """Best-effort text of a word after quote removal (expansions stay as written)."""
    kind = node.type
    text = _text(node)
    if kind == "raw_string":
        return text[1:-1] if len(text) >= 2 else text
    if kind == "string":
        inner = text[1:-1] if len(text) >= 2 else text
        return _unescape(inner, '"\\$`')
    if kind == "word":
        return _unescape(text)
    if kind == "concatenation":
        return "".join(_literal(c) for c in node.named_children) if node.named_children else text
    if kind == "ansi_c_string":
        return ansi_c_decode(text[2:-1]) if len(text) >= 3 else text
    return text


def _redirect_parts(node: Node) -> tuple[str, str | None, list[Node]]:
    """(operator, file descriptor, value nodes) of a redirection."""
    operator = ""
    fd: str | None = None
    values: list[Node] = []
    for child in node.children:
        if child.type == "file_descriptor":
            fd = _text(child)
        elif not child.is_named:
            if not operator:
                operator = _text(child)
        elif child.type not in ("heredoc_start", "heredoc_body", "heredoc_end"):
            values.append(child)
    return operator, fd, values


def _redirect_extras(node: Node) -> list[Node]:
    """Words the parser attached to a redirection after its target: they are the
    command's own words (``rm >out -rf x``, ``<in rm -rf x``)."""
    if node.type == "heredoc_redirect":
        return []
    _, _, values = _redirect_parts(node)
    return [v for v in values[1:] if v.type not in _STATEMENTS]


def _is_fd_prefix(body: Node, redirects: list[Node]) -> bool:
    """``0<in cmd`` parses as a command named ``0`` glued to the redirection."""
    if body.type != "command" or not redirects:
        return False
    text = _text(body)
    return text.isdigit() and body.end_byte == redirects[0].start_byte


def _stdin_of(node: Node) -> tuple[str, str | None] | None:
    """Where a redirection points standard input, if it does."""
    operator, fd, values = _redirect_parts(node)
    if fd not in (None, "0"):
        return None
    if node.type == "herestring_redirect":
        value = values[0] if values else None
        if value is None or not _is_plain(value):
            return ("herestring", None)
        return ("herestring", _literal(value) + "\n")
    if node.type == "heredoc_redirect":
        body = next((c for c in node.children if c.type == "heredoc_body"), None)
        start = next((c for c in node.children if c.type == "heredoc_start"), None)
        quoted = start is not None and any(q in _text(start) for q in "'\"\\")
        if body is None:
            return ("heredoc", "")
        expands = any(c.type not in ("heredoc_content",) for c in body.named_children) or (
            not quoted and any(ch in _text(body) for ch in "$`\\")
        )
        return ("heredoc", None if expands else _text(body))
    if operator in ("<", "<>"):
        target = values[0] if values else None
        if target is None or not _is_plain(target):
            return ("file", None)
        return ("file", _literal(target))
    if operator in ("<&", "<&-"):
        return ("fd", None)
    return None


def _word_values(node: Node) -> list[tuple[str, bool]]:
    """The words bash makes of one argument node after brace expansion, each with
    whether it is a literal."""
    if _is_plain(node):
        return [(_literal(node), True)]
    text = _text(node)
    if node.type in ("word", "concatenation") and "{" in text:
        expanded = brace_expand(text)
        if expanded is not None:
            return expanded
    return [(_literal(node), False)]


# -- quoting and brace expansion on raw word text ---------------------------------------

_QUOTED = re.compile(r"""\$'(?:[^'\\]|\\.)*'|'[^']*'|"(?:[^"\\]|\\.)*"|\\.""", re.DOTALL)
_PLACEHOLDER = 0xE000  # private-use code points stand for quoted segments
_MAX_BRACE_WORDS = 256


def _dequote_segment(segment: str) -> str:
    if segment.startswith("$'"):
        return ansi_c_decode(segment[2:-1])
    if segment.startswith("'"):
        return segment[1:-1]
    if segment.startswith('"'):
        return _unescape(segment[1:-1], '"\\$`\n')
    return _unescape(segment)


def brace_expand(text: str) -> list[tuple[str, bool]] | None:
    """Brace expansion of one raw (still quoted) word, as bash does it before any other
    expansion: ``-{r,f}`` -> ``-r -f``, ``{1..3}``, nested braces. Each result comes
    with whether it is a literal. None when the word holds expansions bash performs
    later (``$``, backticks) or would produce too many words."""
    segments: list[str] = []

    def hide(match: re.Match[str]) -> str:
        segments.append(match.group(0))
        return chr(_PLACEHOLDER + len(segments) - 1)

    if len(text) > 4096:
        return None
    hidden = _QUOTED.sub(hide, text)
    if "$" in hidden or "`" in hidden or len(segments) > 1000:
        return None
    results = _expand_braces(hidden, 0)
    if results is None or len(results) > _MAX_BRACE_WORDS:
        return None
    out = []
    for item in results:
        literal = not (set(item) & _GLOB_CHARS) and not item.startswith("~")
        value = "".join(
            _dequote_segment(segments[ord(c) - _PLACEHOLDER])
            if _PLACEHOLDER <= ord(c) < _PLACEHOLDER + len(segments)
            else c
            for c in item
        )
        out.append((value, literal))
    return out


def _expand_braces(text: str, depth: int) -> list[str] | None:
    if depth > 8:
        return None
    start = 0
    while True:
        open_at = text.find("{", start)
        if open_at < 0:
            return [text]
        close_at, parts = _brace_group(text, open_at)
        if close_at < 0:
            start = open_at + 1
            continue
        head, tail = text[:open_at], text[close_at + 1 :]
        items: list[str] | None
        if parts is None:
            items = _sequence(text[open_at + 1 : close_at])
            if items is None:
                start = open_at + 1
                continue
        else:
            items = parts
        tails = _expand_braces(tail, depth + 1)
        if tails is None:
            return None
        out: list[str] = []
        for item in items:
            inner = _expand_braces(head + item, depth + 1)
            if inner is None:
                return None
            out.extend(i + t for i in inner for t in tails)
            if len(out) > _MAX_BRACE_WORDS:
                return None
        return out


def _brace_group(text: str, open_at: int) -> tuple[int, list[str] | None]:
    """Index of the matching ``}`` and the comma-separated parts (None: no top-level
    comma, possibly a sequence); (-1, None) when the brace is not a group."""
    depth = 0
    parts: list[str] = []
    begin = open_at + 1
    for i in range(open_at, len(text)):
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                if parts:
                    parts.append(text[begin:i])
                    return i, parts
                return i, None
        elif c == "," and depth == 1:
            parts.append(text[begin:i])
            begin = i + 1
    return -1, None


def _sequence(body: str) -> list[str] | None:
    match = re.fullmatch(r"(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])(?:\.\.(-?\d+))?", body)
    if not match:
        return None
    first, last, step_text = match.groups()
    step = abs(int(step_text)) if step_text and int(step_text) else 1
    if first.lstrip("-").isdigit() and last.lstrip("-").isdigit():
        a, b = int(first), int(last)
        if abs(b - a) // step > _MAX_BRACE_WORDS:
            return None
        width = max(len(first), len(last)) if first.lstrip("-").startswith("0") else 0
        values = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
        return [str(v).zfill(width) if width else str(v) for v in values]
    if len(first) == 1 and len(last) == 1 and not first.isdigit() and not last.isdigit():
        a, b = ord(first), ord(last)
        values = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
        return [chr(v) for v in values]
    return None


_ANSI_SIMPLE = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}


def ansi_c_decode(body: str) -> str:
    """The value of ``$'body'`` (bash's ANSI-C quoting); a NUL ends the string."""
    out: list[str] = []
    i = 0
    n = len(body)
    while i < n:
        c = body[i]
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        i += 2
        if e in _ANSI_SIMPLE:
            out.append(_ANSI_SIMPLE[e])
        elif e in "01234567":
            digits = e
            while i < n and len(digits) < 3 and body[i] in "01234567":
                digits += body[i]
                i += 1
            out.append(chr(int(digits, 8) & 0xFF))
        elif e in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[e]
            digits = ""
            while i < n and len(digits) < width and body[i] in "0123456789abcdefABCDEF":
                digits += body[i]
                i += 1
            if not digits:
                out.append("\\" + e)
            else:
                code = int(digits, 16)
                out.append(chr(code) if code < 0x110000 else "\ufffd")
        elif e == "c" and i < n:
            out.append(chr(ord(body[i].upper()) ^ 0x40))
            i += 1
        else:
            out.append("\\" + e)
    text = "".join(out)
    return text.split("\0", 1)[0]


def _unescape(text: str, escapable: str | None = None) -> str:
    """Remove backslash escapes: any character outside quotes (``escapable`` None), only
    ``escapable`` ones inside double quotes."""
    out = []
    i = 0
    while i < len(text):
        if text[i] == "\\" and text[i + 1 : i + 2] == "\n":
            i += 2  # a line continuation: bash removes both characters
            continue
        if (
            text[i] == "\\"
            and i + 1 < len(text)
            and (escapable is None or text[i + 1] in escapable)
        ):
            out.append(text[i + 1])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _leaves_for_test(node: Node) -> Iterator[Node]:
    for child in node.named_children:
        if child.type in (
            "word",
            "string",
            "raw_string",
            "number",
            "test_operator",
            "simple_expansion",
            "expansion",
            "concatenation",
        ):
            yield child
        else:
            yield from _leaves_for_test(child)


def _redirect_targets(node: Node) -> list[tuple[str, str]]:
    operator = ""
    target = ""
    for child in node.children:
        if not child.is_named:
            operator = _text(child)
        elif child.type != "file_descriptor":
            target = _literal(child)
    return [(operator, target)] if operator else []


def unbalanced_quote(command: str) -> str | None:
    """Describe an unterminated quote, if the string has one (bash's own quoting rules)."""
    quote: str | None = None
    i = 0
    n = len(command)
    while i < n:
        c = command[i]
        if quote is None:
            if c == "\\":
                i += 2
                continue
            if c == "#" and (i == 0 or command[i - 1] in " \t\n;|&("):
                newline = command.find("\n", i)
                if newline < 0:
                    break
                i = newline
            elif c in "'\"`":
                quote = c
                start = i
            elif c == "$" and i + 1 < n and command[i + 1] == "'":
                quote = "$'"
                start = i
                i += 1
        elif quote == "'":
            if c == "'":
                quote = None
        elif quote == "$'":
            if c == "\\":
                i += 2
                continue
            if c == "'":
                quote = None
        else:  # double quote or backtick
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        i += 1
    if quote is None:
        return None
    kind = {"'": "single quote", '"': "double quote", "`": "backtick", "$'": "$' quote"}[quote]
    return (
        f"unbalanced {kind}: the {kind} opened at character {start + 1} is never closed; "
        "close it or escape it"
    )
