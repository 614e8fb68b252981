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
import shlex
from collections.abc import Iterator
from dataclasses import dataclass

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

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
_LITERAL_TYPES = frozenset({"word", "raw_string", "number", "string", "concatenation"})
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


# The bytes being analysed (node texts are sliced from them).
_SOURCE: contextvars.ContextVar[bytes] = contextvars.ContextVar("analysis_source", default=b"")


@functools.cache
def _parser() -> Parser:
    return Parser(Language(tree_sitter_bash.language()))


@functools.lru_cache(maxsize=512)
def analyze(command: str) -> Analysis:
    """Analyse ``command``; pure, so results are cached (agents repeat commands often)."""
    try:
        return _analyze(command)
    except Exception as exc:  # never let a parser surprise break a tool call
        return Analysis(
            source=command, needs_shell=True, reasons=(f"analysis failed: {exc}",), parse_ok=False
        )


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
    source = command.encode("utf-8", errors="surrogateescape")
    token = _SOURCE.set(source)
    try:
        return _analyze_source(command, source)
    finally:
        _SOURCE.reset(token)


def _analyze_source(command: str, source: bytes) -> Analysis:
    tree = _parser().parse(_ascii_copy(source))
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
        self.pipefail = False
        self.decider_nodes: dict[int, SimpleCommand] = {}

    def reason(self, why: str) -> None:
        if why not in self.reasons:
            self.reasons.append(why)

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
            self._descend_expansions(node)
        elif kind == "pipeline":
            self.reason("pipe")
            for child in node.named_children:
                self.walk(child)
        elif kind == "list":
            self.reason("command list")
            for child in node.named_children:
                self.walk(child)
        elif kind == "variable_assignment":
            self.reason("variable assignment")
            self._descend_expansions(node)
        elif kind in ("declaration_command", "unset_command"):
            self.reason("shell builtin")
            words = tuple(_literal(c) for c in node.children if c.type not in ("comment",))
            self._record(node, SimpleCommand(words=words))
            self._descend_expansions(node)
        elif kind in ("command_substitution", "process_substitution"):
            self.reason("command substitution")
            for child in node.named_children:
                self.walk(child)
        elif kind == "comment":
            self.reason("comment")
        else:
            if kind not in ("ERROR",):
                self.reason(kind.replace("_", " "))
            for child in node.named_children:
                self.walk(child)

    def _command(self, node: Node) -> None:
        words: list[str] = []
        plain: list[bool] = []
        assignments: list[str] = []
        name_is_literal = True
        targets: list[tuple[str, str]] = []
        for child in node.named_children:
            kind = child.type
            if kind == "variable_assignment":
                self.reason("variable assignment")
                assignments.append(_text(child))
                self._descend_expansions(child)
            elif kind == "command_name":
                inner = child.named_children[0] if child.named_children else child
                if not _is_plain(inner):
                    name_is_literal = False
                    self.reason("expansion in command name")
                words.append(_literal(inner))
                plain.append(name_is_literal)
                self._descend_expansions(inner)
            elif kind in ("file_redirect", "herestring_redirect", "heredoc_redirect"):
                self.reason("redirection")
                targets.extend(_redirect_targets(child))
                self._descend_expansions(child)
            else:
                literal = _is_plain(child)
                if not literal:
                    self.reason(_why_not_plain(child))
                words.append(_literal(child))
                plain.append(literal or child.type == "word")
                self._descend_expansions(child)
        if words and words[0] in SHELL_ONLY:
            self.reason(f"shell builtin {words[0]}")
        command = SimpleCommand(
            words=tuple(words),
            name_is_literal=name_is_literal,
            assignments=tuple(assignments),
            redirect_targets=tuple(targets),
            plain=tuple(plain),
        )
        self._record(node, command)
        self._look_inside(command)

    def _redirected(self, node: Node) -> None:
        redirects = [c for c in node.named_children if c.type.endswith("redirect")]
        targets = tuple(t for r in redirects for t in _redirect_targets(r))
        body = next((c for c in node.named_children if not c.type.endswith("redirect")), None)
        for redirect in redirects:
            self._descend_expansions(redirect)
        if body is None:
            # A bare ``> file`` is an empty command whose only effect is the redirection.
            self._record(node, SimpleCommand(words=(":",), redirect_targets=targets))
            return
        self.walk(body)
        command = self.decider_nodes.get(body.id)
        if command is not None and body.type == "command":
            updated = dataclasses.replace(
                command, redirect_targets=command.redirect_targets + targets
            )
            self.commands[self.commands.index(command)] = updated
            self.decider_nodes[body.id] = updated
            self.decider_nodes[node.id] = updated

    def _record(self, node: Node, command: SimpleCommand) -> None:
        self.commands.append(command)
        self.decider_nodes[node.id] = command
        if command.program == "set" and _sets_pipefail(command.args):
            self.pipefail = True

    def _look_inside(self, command: SimpleCommand) -> None:
        """Scripts given to ``bash -c`` are analysed too (for warnings and semantics)."""
        for inner in unwrap(command):
            if inner.program in ("bash", "sh", "dash", "zsh", "ksh") and "-c" in inner.args:
                index = inner.args.index("-c")
                if index + 1 < len(inner.args):
                    self.inline_scripts.append(inner.args[index + 1])

    def _descend_expansions(self, node: Node) -> None:
        for child in node.named_children:
            if child.type in ("command_substitution", "process_substitution"):
                self.walk(child)
            else:
                self._descend_expansions(child)


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


def unwrap(command: SimpleCommand) -> list[SimpleCommand]:
    """The command itself and the commands it runs through known wrappers.

    ``sudo -u x env A=1 nice -n 5 rm -rf /`` yields the whole command and ``rm -rf /``;
    ``find . -exec rm {} ;`` yields the find and the ``rm {}``; ``xargs rm`` yields
    ``rm``. The last element is the innermost command.
    """
    out = [command]
    current = command
    for _ in range(8):  # wrappers nest rarely; bound the work
        inner = _strip_wrapper(current)
        if inner is None:
            break
        out.append(inner)
        current = inner
    for item in list(out):
        if item.program in ("find",):
            out.extend(_find_exec(item))
    return out


def innermost(command: SimpleCommand) -> SimpleCommand:
    result = command
    for _ in range(8):
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
}
# Wrappers whose first positional argument is not the command (timeout DURATION cmd).
_WRAPPER_POSITIONAL = {"timeout": 1}


def _strip_wrapper(command: SimpleCommand) -> SimpleCommand | None:
    program = command.program
    if program not in _WRAPPER_VALUE_OPTIONS:
        return None
    if program == "command" and any(a in ("-v", "-V") for a in command.args):
        return None  # a lookup, not an execution
    value_options = _WRAPPER_VALUE_OPTIONS[program]
    args = list(command.args)
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
            i += 1
            if arg in value_options and "=" not in arg:
                i += 1
            elif program == "nice" and arg[1:].isdigit():
                pass
            continue
        if skip_positional:
            skip_positional -= 1
            i += 1
            continue
        break
    rest = tuple(args[i:])
    if not rest:
        return None
    plain = command.plain[i + 1 :]
    return SimpleCommand(words=rest, name_is_literal=plain[0] if plain else True, plain=plain)


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
        return text[2:-1] if len(text) >= 3 else text
    return text


def _unescape(text: str, escapable: str | None = None) -> str:
    """Remove backslash escapes: any character outside quotes (``escapable`` None), only
    ``escapable`` ones inside double quotes."""
    out = []
    i = 0
    while i < len(text):
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
