"""Command analysis, semantic exits and warnings, table-driven (pure functions)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from terminal_tools.core.analysis import analyze
from terminal_tools.core.destructive import destructive_warning
from terminal_tools.core.semantics import classify_exit

# (command, needs_shell, direct argv when direct)
ROUTING = [
    ("ls -la", False, ("ls", "-la")),
    ("git commit -m 'two words'", False, ("git", "commit", "-m", "two words")),
    ('grep "a|b" f', False, ("grep", "a|b", "f")),
    ("printf '%s;%s' a b", False, ("printf", "%s;%s", "a", "b")),
    ("python3 -c 'print(1)'", False, ("python3", "-c", "print(1)")),
    ("echo it\\'s", False, ("echo", "it's")),
    ("timeout 5 grep x f", False, ("timeout", "5", "grep", "x", "f")),
    ("sudo rm -rf /", False, ("sudo", "rm", "-rf", "/")),
    ('echo "rm -rf /"', False, ("echo", "rm -rf /")),
    ("curl --data=a=b http://x", False, ("curl", "--data=a=b", "http://x")),
    ("echo hi>out", True, None),
    ("echo hi > out", True, None),
    ("cat < in", True, None),
    ("ls 2>&1", True, None),
    ("ls | wc -l", True, None),
    ("make && make test", True, None),
    ("false || echo fallback", True, None),
    ("a; b", True, None),
    ("sleep 1 &", True, None),
    ("echo $HOME", True, None),
    ('echo "$HOME"', True, None),
    ("echo ${X:-y}", True, None),
    ("echo $(date)", True, None),
    ("echo `date`", True, None),
    ("ls *.py", True, None),
    ("ls file?.txt", True, None),
    ("ls [ab].txt", True, None),
    ("echo {a,b}", True, None),
    ("echo {1..3}", True, None),
    ("ls ~", True, None),
    ("ls ~/src", True, None),
    ("FOO=1 env", True, None),
    ("FOO=1", True, None),
    ("cd /tmp", True, None),
    ("cd /tmp && pwd", True, None),
    ("export A=1", True, None),
    ("source venv/bin/activate", True, None),
    (". ./env.sh", True, None),
    ("ulimit -n", True, None),
    ("alias ll='ls -l'", True, None),
    ("set -e", True, None),
    ("cat <<EOF\nhi\nEOF", True, None),
    ("cat <<< 'hi'", True, None),
    ("diff <(ls a) <(ls b)", True, None),
    ("(cd sub && make)", True, None),
    ("{ echo a; echo b; }", True, None),
    ("for f in a b; do echo $f; done", True, None),
    ("if true; then echo y; fi", True, None),
    ("[ -f x ]", True, None),
    ("[[ -f x ]]", True, None),
    ("echo $'a\\tb'", True, None),
    ("ls # comment", True, None),
    ("! grep x f", True, None),
]


@pytest.mark.parametrize("command,needs_shell,argv", ROUTING)
def test_routing(command: str, needs_shell: bool, argv: tuple[str, ...] | None) -> None:
    analysis = analyze(command)
    assert analysis.error is None
    assert analysis.needs_shell is needs_shell, analysis.reasons
    if argv is not None:
        assert analysis.argv == argv


@pytest.mark.parametrize("command", ["echo 'x", 'echo "x', "echo `x", "echo $'x"])
def test_unbalanced_quotes_are_errors(command: str) -> None:
    assert "unbalanced" in (analyze(command).error or "")


# (command, exit code, shell_kind, status, message fragment)
SEMANTICS = [
    ("grep x f", 1, "direct", "ok", "No matches"),
    ("egrep x f", 1, "direct", "ok", "No matches"),
    ("fgrep x f", 1, "direct", "ok", "No matches"),
    ("rg x", 1, "direct", "ok", "No matches"),
    ("ag x", 1, "direct", "ok", "No matches"),
    ("grep x f", 2, "direct", "error", "status 2"),
    ('grep "a|b" f', 1, "direct", "ok", "No matches"),
    ("timeout 5 grep x f", 1, "direct", "ok", "No matches"),
    ("timeout 5 grep x f", 124, "direct", "error", "timed out"),
    ("sudo grep x /root/f", 1, "direct", "ok", "No matches"),
    ("env A=1 grep x f", 1, "direct", "ok", "No matches"),
    ("A=1 grep x f", 1, "bash", "ok", "No matches"),
    ("time grep x f", 1, "bash", "ok", "No matches"),
    ("nice -n 5 grep x f", 1, "direct", "ok", "No matches"),
    ("nohup grep x f", 1, "direct", "ok", "No matches"),
    ("command grep x f", 1, "bash", "ok", "No matches"),
    ("ls | xargs grep x", 123, "bash", "ok", "No matches"),
    ("cat f | grep x", 1, "bash", "ok", "No matches"),
    ("grep x f | wc -l", 1, "bash", "error", "status 1"),
    ("cd /tmp && grep x f", 1, "bash", "ok", "No matches"),
    ("set -o pipefail; grep a f | grep b", 1, "bash", "ok", "No matches"),
    ("set -euo pipefail; cat f | grep b", 1, "bash", "error", "pipefail"),
    ("diff a b", 1, "direct", "ok", "differ"),
    ("cmp a b", 1, "direct", "ok", "differ"),
    ("diff a b", 2, "direct", "error", "status 2"),
    ("test -f x", 1, "direct", "ok", "false"),
    ("[ -f x ]", 1, "bash", "ok", "false"),
    ("[[ -f x ]]", 1, "bash", "ok", "false"),
    ("find / -name x", 1, "direct", "ok", "could not be read"),
    ("git diff --exit-code", 1, "direct", "ok", "Differences"),
    ("git diff --quiet", 1, "direct", "ok", "Differences"),
    ("git diff", 1, "direct", "error", "status 1"),
    ("curl -f http://x", 22, "direct", "error", "HTTP error"),
    ("curl http://x", 6, "direct", "error", "resolve host"),
    ("curl http://x", 7, "direct", "error", "connect"),
    ("bash -c 'grep x f'", 1, "direct", "ok", "No matches"),
    ("nosuch", 127, "bash", "error", "command not found: nosuch"),
    ("./script.sh", 126, "bash", "error", "not executable"),
    ("sleep 10", 137, "bash", "signal", "SIGKILL"),
    ("sleep 10", 130, "bash", "signal", "SIGINT"),
    ("sleep 10", 130, "direct", "error", "status 130"),
    ("sleep 10", -15, "direct", "signal", "SIGTERM"),
    ("make", 2, "direct", "error", "status 2"),
    ("grep x f &", 1, "bash", "error", "status 1"),
    ("! grep x f", 1, "bash", "error", "status 1"),
]


@pytest.mark.parametrize("command,code,shell_kind,status,fragment", SEMANTICS)
def test_semantic_exits(command: str, code: int, shell_kind: str, status: str,
                        fragment: str) -> None:
    verdict = classify_exit(code, analyze(command), shell_kind=shell_kind,
                            stderr_tail="bash: line 1: nosuch: command not found\n")
    assert verdict.status == status
    assert fragment in (verdict.message or "")


def test_exit_zero_is_ok_without_message() -> None:
    verdict = classify_exit(0, analyze("grep x f"))
    assert verdict.status == "ok" and verdict.message is None


# (command, fragment of the warning, or None for no warning)
WARNINGS = [
    ("rm -rf build", "rm -rf"),
    ("rm -r build", "rm -r"),
    ("rm -f x", "rm -f"),
    ("rm x", None),
    ("rm -rf /", "the whole filesystem"),
    ("rm -rf ~", "home directory"),
    ("rm -rf $HOME", "home directory"),
    ("rm -rf ..", "parent directory"),
    ("rm -rf *", "everything in the current directory"),
    ("sudo rm -rf /", "the whole filesystem"),
    ("ls | xargs rm -rf", "rm -rf"),
    ("find . -name '*.o' -exec rm -f {} \\;", "rm -f"),
    ("bash -c 'rm -rf ~'", "home directory"),
    ("find . -name '*.tmp' -delete", "find -delete"),
    ("git reset --hard HEAD~1", "reset --hard"),
    ("git clean -fdx", "git clean"),
    ("git checkout -- .", "discards"),
    ("git restore .", "discards"),
    ("git push --force origin main", "force"),
    ("git push -f", "force"),
    ("git branch -D feature", "branch -D"),
    ("git stash drop", "stash drop"),
    ("git stash clear", "stash clear"),
    ("git commit --no-verify -m x", "--no-verify"),
    ("git commit --amend", "--amend"),
    ("dd if=/dev/zero of=/dev/sda", "dd of="),
    ("mkfs.ext4 /dev/sdb1", "mkfs"),
    ("shred secret.txt", "shred"),
    ("chmod -R 777 /srv", "world-writable"),
    ("chown -R me /srv", "chown -R"),
    ("truncate -s 0 app.log", "truncate"),
    (": > app.log", "empties"),
    ("psql -c 'DROP TABLE users'", "DROP TABLE"),
    ("mysql -e 'TRUNCATE TABLE t'", "TRUNCATE"),
    ("sqlite3 db 'DELETE FROM t'", "DELETE FROM"),
    ("sqlite3 db 'DELETE FROM t WHERE id = 1'", None),
    ("kubectl delete pod web", "kubectl delete"),
    ("terraform destroy", "terraform destroy"),
    ("docker system prune -af", "prune"),
    ("Remove-Item -Recurse C:/tmp/x", "Remove-Item"),
    ("rd /s /q build", "rd /s"),
    ("del /s *.tmp", "del /s"),
    ('echo "rm -rf /"', None),
    ("grep -r 'rm -rf' .", None),
    ("git status", None),
    ("ls -la", None),
]


@pytest.mark.parametrize("command,fragment", WARNINGS)
def test_destructive_warnings(command: str, fragment: str | None) -> None:
    warning = destructive_warning(analyze(command))
    if fragment is None:
        assert warning is None
    else:
        assert warning is not None and fragment in warning


def test_several_hits_are_named_in_one_message() -> None:
    warning = destructive_warning(analyze("git reset --hard && rm -rf build"))
    assert warning and "reset --hard" in warning and "rm -rf" in warning and "; " in warning


@settings(max_examples=1500, deadline=None)
@given(st.text(max_size=200))
def test_analysis_never_raises(command: str) -> None:
    analysis = analyze(command)
    destructive_warning(analysis)
    classify_exit(1, analysis, shell_kind="bash")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["ls", "-la", "'a b'", '"c|d"', "|", "&&", ";", ">", "x",
                                 "$V", "*", "~", "sudo", "rm", "-rf", "(", ")", "\\", "'"]),
                max_size=12))
def test_analysis_of_shell_like_strings_never_raises(words: list[str]) -> None:
    analysis = analyze(" ".join(words))
    if analysis.argv is not None:
        assert not analysis.needs_shell


def test_non_ascii_commands_parse_without_crashing_and_keep_their_text() -> None:
    # tree-sitter-bash's scanner corrupts memory on code points above 255; the analysis
    # parses an ASCII copy and reads texts from the original.
    for command in ["n\U0002052b\r\xe2\xd5\xd4{\U000a4c43", "\x1d{\U000fb391\xafZ\r\U0006a1ab",
                    "echo 日本語 | grep 語"] * 200:
        analyze.cache_clear()
        analyze(command)
    assert analyze("echo héllo wörld").argv == ("echo", "héllo", "wörld")
    assert analyze("grep 'ü|x' f").deciders[0].words == ("grep", "ü|x", "f")
