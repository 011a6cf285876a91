"""The in-sandbox wrapper for commands run through envd.

envd starts a command in envd's own process group and ``SendSignal`` reaches only that pid,
so a timeout could never kill what the command started, and killing its group would kill envd.
So each command runs under a small ``sh`` script that changes directory (telling a missing
one apart from a failing command), then starts the command as the leader of a new session with
``setsid`` and records that pid.  On timeout a second command reads the pid file and kills the
whole process group; where an image has no ``setsid``, it kills the recorded process tree
instead.  Standard input comes from a file uploaded beforehand (or ``/dev/null``).
"""

from __future__ import annotations

import shlex

from sandbox_runtime._shell import NO_CWD_EXIT, NO_CWD_MARKER, shell_text

__all__ = ["STATE_DIR", "kill_argv", "wrapped_argv"]

STATE_DIR = "/tmp/.sandbox-runtime"

# $1 cwd, $2 pid file, $3 shell text, $4 stdin file (or empty).  The inner sh writes its own
# pid (the new session's leader, hence also the group id) before exec'ing the shell.
_WRAPPER = (
    'cd -- "$1" 2>/dev/null || { printf "%s%s\\n" "' + NO_CWD_MARKER + '" "$1" >&2; '
    f"exit {NO_CWD_EXIT}; }}; "
    f"mkdir -p {STATE_DIR} 2>/dev/null; "
    "if command -v bash >/dev/null 2>&1; then s=bash; else s=sh; fi; "
    'i=${4:-/dev/null}; inner=\'echo $$ > "$0"; exec "$1" -c "$2"\'; '
    "if command -v setsid >/dev/null 2>&1; then "
    'setsid sh -c "$inner" "$2" "$s" "$3" < "$i" & '
    'else sh -c "$inner" "$2" "$s" "$3" < "$i" & fi; '
    'p=$!; { wait "$p"; } 2>/dev/null; rc=$?; rm -f "$2"; [ -n "$4" ] && rm -f "$4"; exit $rc'
)

# $1 pid file.  Waits briefly for the pid file (a command killed right as it starts), kills
# the group only if the pid leads one (never envd's group), then the pid and its descendants.
_KILL = (
    'f=$1; n=0; while [ ! -s "$f" ] && [ $n -lt 40 ]; do sleep 0.05; n=$((n+1)); done; '
    'p=$(cat "$f" 2>/dev/null); [ -n "$p" ] || exit 0; '
    "g=$(sed 's/.*) //' /proc/$p/stat 2>/dev/null | cut -d' ' -f3); "
    '[ "$g" = "$p" ] && kill -9 -"$p" 2>/dev/null; '
    't() { for c in $(grep -l "^PPid:[[:space:]]*$1\\$" /proc/[0-9]*/status 2>/dev/null '
    '| cut -d/ -f3); do t "$c"; done; kill -9 "$1" 2>/dev/null; }; t "$p"; rm -f "$f"; true'
)


def wrapped_argv(
    command: str | tuple[str, ...], cwd: str, pidfile: str, stdin_file: str | None
) -> list[str]:
    """``cmd`` and ``args`` for envd: the wrapper running ``command`` in ``cwd``."""
    return [
        "/bin/sh",
        "-c",
        _WRAPPER,
        "sandbox-runtime",
        cwd,
        pidfile,
        shell_text(command),
        stdin_file or "",
    ]


def kill_argv(pidfile: str) -> list[str]:
    """``cmd`` and ``args`` that kill the command recorded in ``pidfile`` with its group."""
    return ["/bin/sh", "-c", _KILL, "sandbox-runtime-kill", pidfile]


def quoted(argv: list[str]) -> str:
    """The argument vector as shell text (for messages)."""
    return shlex.join(argv)
