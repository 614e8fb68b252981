"""ripgrep command-line flags in ``terminal_rg(extra_args=[...])``, read as parameters.

Agents trained on ripgrep (and the reference's skills) pass flags such as ``-w``, ``-F``
or ``--multiline``. They are not handed to rg: a few rg flags run programs
(``--pre``) or change what the structured reader sees (``--json`` off, colours,
``--null``), and the Python engine has no flags at all. Each known flag becomes the
parameter it means, so both engines honour it; anything else is refused with the way
to get it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from ..errors import InvalidInput
from .search import SearchRequest

# Flags that only shape rg's text output, which the structured result replaces.
_NO_OPS = frozenset(
    {"-n", "--line-number", "-H", "--with-filename", "--no-heading", "--heading", "--color=never"}
)
_SUPPORTED = (
    "-i -s -F -w -U --multiline --multiline-dotall -l -c -. --hidden -u -uu --no-ignore "
    "-g/--glob X -t/--type X -m/--max-count N -d/--max-depth N -C/-A/-B N -j N, and the "
    "no-ops -n -H --no-heading"
)


@dataclass
class ExtraArgs:
    """What the flags asked for, beyond the request's fields."""

    count: bool = False
    notes: list[str] = field(default_factory=list)


def apply_extra_args(request: SearchRequest, args: list[str]) -> tuple[SearchRequest, ExtraArgs]:
    extra = ExtraArgs()
    changes: dict[str, object] = {}
    globs = list(request.globs)
    context = request.context
    word = False
    queue = list(args)

    def value(flag: str, attached: str | None) -> str:
        if attached:
            return attached
        if not queue:
            raise InvalidInput(f"extra_args: {flag} needs a value")
        return queue.pop(0)

    def number(flag: str, attached: str | None) -> int:
        text = value(flag, attached)
        if not text.isdigit():
            raise InvalidInput(f"extra_args: {flag} needs a number, got {text!r}")
        return int(text)

    while queue:
        arg = queue.pop(0)
        long, _, attached_long = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        short = re.fullmatch(r"-([gtmdCABj])(.+)?", arg)
        attached = attached_long or (short.group(2) if short else None)
        if arg in _NO_OPS:
            continue
        if arg in ("-i", "--ignore-case"):
            changes["ignore_case"] = True
        elif arg in ("-s", "--case-sensitive"):
            changes["ignore_case"] = False
        elif arg in ("-F", "--fixed-strings"):
            changes["fixed_strings"] = True
        elif arg in ("-w", "--word-regexp"):
            word = True
        elif arg in ("-U", "--multiline", "--multiline-dotall"):
            changes["multiline"] = True
        elif arg in ("-l", "--files-with-matches"):
            changes["files_with_matches"] = True
        elif arg in ("-c", "--count"):
            extra.count = True
        elif arg in ("-.", "--hidden"):
            changes["hidden"] = True
        elif arg in ("-u", "--no-ignore"):
            changes["no_ignore"] = True
        elif arg == "-uu":
            changes["no_ignore"] = changes["hidden"] = True
        elif long in ("--glob", "--iglob") or (short and short.group(1) == "g"):
            flag = long if long.startswith("--") else "-g"
            globs.append(value(flag, attached))
        elif long == "--type" or (short and short.group(1) == "t"):
            changes["type_filter"] = value("-t", attached)
        elif long == "--max-count" or (short and short.group(1) == "m"):
            changes["max_count"] = number("-m", attached)
        elif long == "--max-depth" or (short and short.group(1) == "d"):
            changes["max_depth"] = number("-d", attached)
        elif long in ("--context", "--after-context", "--before-context") or (
            short and short.group(1) in "CAB"
        ):
            lines = number(arg[:2], attached)
            if lines > 20:
                raise InvalidInput("extra_args: at most 20 lines of context")
            context = max(context, lines)
        elif long == "--threads" or (short and short.group(1) == "j"):
            number("-j", attached)
        else:
            raise InvalidInput(
                f"extra_args: {arg!r} is not supported by terminal_rg (supported: {_SUPPORTED}). "
                "For any other ripgrep option run rg itself with terminal_exec."
            )
    if word:
        pattern = request.pattern
        if changes.get("fixed_strings", request.fixed_strings):
            pattern = re.escape(pattern)
            changes["fixed_strings"] = False
        changes["pattern"] = rf"\b(?:{pattern})\b"
    if context != request.context:
        changes["context"] = context
    if globs != list(request.globs):
        changes["globs"] = tuple(globs)
    return replace(request, **changes), extra  # type: ignore[arg-type]
