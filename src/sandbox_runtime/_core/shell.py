"""The in-sandbox wrapper for backends that run commands through an exec API.

Docker's exec, ``kubectl exec`` and envd's process API cannot kill what a command started
and cannot tell a missing working directory from a failing command.  So each command runs
inside one shell process that changes directory and then runs the command text as its last
command (a simple command then replaces the shell: one process, no fork).  The
backend puts a unique token in the command's environment (``SANDBOX_RUNTIME_EXEC``), which
every descendant inherits even across ``exec`` and ``setsid``; when a timeout fires, the kill
script finds the processes by that token and kills them and the process groups they lead.
That works whether or not the wrapper leads its own session (it does under docker and
kubernetes exec, not under envd, whose own group must survive), and it reaches ``setsid``
children that a process-group kill would miss.  No pid file is written and no helper process
is forked, so the wrapper costs nothing measurable over running the command bare (see
docs/performance.md).  Standard input can come from a file (envd has no stdin stream for a
command started this way): the wrapper opens it and removes it before the command runs.
"""

from __future__ import annotations

import shlex
import uuid

from sandbox_runtime.errors import SandboxFileNotFoundError

__all__ = [
    "NO_CWD_EXIT",
    "NO_CWD_MARKER",
    "TOKEN_VAR",
    "check_cwd",
    "kill_group_script",
    "new_token",
    "shell_text",
    "wrapped_argv",
]

TOKEN_VAR = "SANDBOX_RUNTIME_EXEC"
NO_CWD_EXIT = 254
NO_CWD_MARKER = "sandbox-runtime: no such working directory: "

_CD = (
    'cd -- "$1" 2>/dev/null || { printf "%s%s\\n" "' + NO_CWD_MARKER + '" "$1" >&2; '
    f"exit {NO_CWD_EXIT}; }}; "
)
# $4 = a marker file to create first, or empty: its existence proves the command may have
# started (a client whose connection broke checks it before sending the command again).
_STARTED = '[ -z "$4" ] || { mkdir -p -- "${4%/*}" && : >"$4"; } 2>/dev/null; '
# $3 = a file to read standard input from, or empty: opened, then removed.
_STDIN = '[ -z "$3" ] || { exec <"$3" && rm -f -- "$3"; }; '
# $0 = token, $1 = working directory.  The positional parameters are cleared, and the
# command's text follows on a line of its own: the shell's last command, so that a simple
# command replaces the shell (no fork) as it does under a plain ``bash -c``.  Under ``eval``
# bash forked every command first: about 0.9 ms per external command on a 2-core host.
_PREFIX = _STARTED + _CD + _STDIN + "set --\n"
# When the shell is unknown: sh checks for bash and replaces itself with it (same pid),
# keeping the token as bash's $0 so it stays on the command line.
_AUTO = (
    _STARTED
    + _CD
    + _STDIN
    + 'if command -v bash >/dev/null 2>&1; then exec bash -c "$2" "$0"; fi; exec sh -c "$2" "$0"'
)


# An argument vector too long for one argument: its words follow the four fixed parameters
# and run as one simple command (builtins and functions resolve as under eval).
_ARGV = _STARTED + _CD + _STDIN + 'shift 4; "$@"'
#: Linux refuses one argument longer than this (MAX_ARG_STRLEN, 32 pages); a command whose
#: quoted text is longer travels word by word (each word still under it).
_LONGEST_ARGUMENT = 128 * 1024 - 1


def check_cwd(exit_code: int, stderr: bytes, cwd: str) -> None:
    """Raise :class:`SandboxFileNotFoundError` when the wrapper reported a missing ``cwd``.

    Both the exit code and the marker must match, so a command that happens to exit 254
    stays a command result.
    """
    if exit_code == NO_CWD_EXIT and stderr.startswith(NO_CWD_MARKER.encode()):
        raise SandboxFileNotFoundError(f"working directory does not exist: {cwd}")


def new_token() -> str:
    """A unique marker for one command's wrapper process."""
    return f"sandbox-runtime-{uuid.uuid4().hex}"


def shell_text(command: str | tuple[str, ...]) -> str:
    """A command as shell text: strings as given, argument vectors quoted."""
    return command if isinstance(command, str) else shlex.join(command)


def wrapped_argv(
    command: str | tuple[str, ...],
    cwd: str,
    token: str,
    shell: str | None = None,
    stdin_file: str | None = None,
    started_marker: str | None = None,
) -> list[str]:
    """The argument vector that runs ``command`` in ``cwd``, findable by ``token``.

    ``shell`` is the interpreter to use (``bash`` when the image is known to have it, else
    ``/bin/sh``); ``None`` lets ``/bin/sh`` pick bash when present, at the cost of one exec.
    ``stdin_file`` is a sandbox file that becomes the command's standard input (and is
    removed); ``started_marker`` a sandbox file created before anything else.  The caller
    sets ``TOKEN_VAR=token`` in the command's environment.
    """
    text = shell_text(command)
    tail = [stdin_file or "", started_marker or ""]
    if not isinstance(command, str) and len(text.encode()) > _LONGEST_ARGUMENT // 2:
        # As one shell text it would fail with E2BIG ("Argument list too long").
        return [shell or "/bin/sh", "-c", _ARGV, token, cwd, "", *tail, *command]
    if shell is None:
        return ["/bin/sh", "-c", _AUTO, token, cwd, text, *tail]
    return [shell, "-c", _PREFIX + text, token, cwd, "", *tail]


def kill_group_script(token: str, *, var: str = TOKEN_VAR) -> list[str]:
    """An argument vector that SIGKILLs every process carrying ``token``, and their groups.

    It matches ``var=token`` (``TOKEN_VAR`` by default) in ``/proc/<pid>/environ``.  The token
    is passed in two halves so that the kill script's own command line does not contain it;
    its environment does not either, since only the command's exec carries the token.
    """
    half = len(token) // 2
    # Every carrier is stopped before any is killed: killing one by one let a parent whose
    # child had just died run its next command (``sleep 4; echo late > f`` wrote f when the
    # sleep's pid came first in /proc's order).  A second scan catches what a carrier forked
    # between the first scan and its stop.
    script = (
        f't="{var}=$1$2"; all=""; for pass in 1 2; do found=""; for d in /proc/[0-9]*; do '
        'case " $(tr "\\000" " " < "$d/environ" 2>/dev/null) " in *" $t "*) '
        'found="$found ${d#/proc/}";; esac; done; [ -n "$found" ] || break; '
        'kill -STOP $found 2>/dev/null; all="$all $found"; done; '
        'for p in $all; do kill -9 -"$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done; true'
    )
    return ["/bin/sh", "-c", script, "sandbox-runtime-kill", token[:half], token[half:]]
