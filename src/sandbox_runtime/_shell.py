"""The in-sandbox wrapper for backends that run commands through an exec API.

Docker's exec (and ``kubectl exec``) cannot kill what a command started, cannot tell a
missing working directory from a failing command, and does not say which shell exists.
So the command runs under a tiny POSIX ``sh`` script that changes directory, writes its own
pid (a session leader under these exec APIs, hence also the process-group id) to a file the
client can use to kill the whole group on timeout, and picks ``bash`` when the image has it.
"""

from __future__ import annotations

import shlex

__all__ = [
    "NO_CWD_EXIT",
    "NO_CWD_MARKER",
    "PIDFILE_DIR",
    "kill_group_script",
    "shell_text",
    "wrapped_argv",
]

PIDFILE_DIR = "/tmp/.sandbox-runtime"
NO_CWD_EXIT = 254
NO_CWD_MARKER = "sandbox-runtime: no such working directory: "

# $1 = working directory, $2 = pid file, $3 = shell text.  The shell stays as the parent
# (no exec) so it can remove the pid file afterwards; a command killed by signal N exits
# 128+N, as in any shell.
_WRAPPER = (
    'cd -- "$1" 2>/dev/null || { printf "%s%s\\n" "' + NO_CWD_MARKER + '" "$1" >&2; '
    f"exit {NO_CWD_EXIT}; }}; "
    f'mkdir -p {PIDFILE_DIR} 2>/dev/null; echo $$ > "$2" 2>/dev/null; '
    'if command -v bash >/dev/null 2>&1; then bash -c "$3"; else sh -c "$3"; fi; '
    'rc=$?; rm -f "$2"; exit $rc'
)


def shell_text(command: str | tuple[str, ...]) -> str:
    """A command as shell text: strings as given, argument vectors quoted."""
    return command if isinstance(command, str) else shlex.join(command)


def wrapped_argv(command: str | tuple[str, ...], cwd: str, pidfile: str) -> list[str]:
    """The argument vector that runs ``command`` in ``cwd`` under the wrapper."""
    return ["/bin/sh", "-c", _WRAPPER, "sandbox-runtime", cwd, pidfile, shell_text(command)]


def kill_group_script(pidfile: str) -> str:
    """Shell text that SIGKILLs the process group recorded in ``pidfile``, then the pid itself."""
    quoted = shlex.quote(pidfile)
    return (
        f'p=$(cat {quoted} 2>/dev/null) && [ -n "$p" ] && '
        f'{{ kill -9 -"$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; }}; rm -f {quoted}; true'
    )
