"""The open-file limit of an envd that runs many commands at once, and of those commands.

Each running command holds four of envd's descriptors (its connection, its stdout and stderr
pipes, a pidfd), so a soft ``RLIMIT_NOFILE`` of 1024, the default of recent container engines
(1024 soft, 524288 hard), lets about 250 commands run at once: the next start fails with
``EMFILE``.  :func:`raise_open_files` lifts envd's own soft limit to its hard limit; a command
still starts with the soft limit envd was given (:func:`with_callers_limit`), as it would
under ``docker exec``, since some programs loop over every possible descriptor up to it.
"""

from __future__ import annotations

import posixpath
import resource

__all__ = ["raise_open_files", "with_callers_limit"]

# Shells whose ``-c`` script can take the ``ulimit`` in front (all have it as a builtin).
_SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh", "ksh"})
# The soft limit envd was started with, once it raised its own; None: unchanged.
_callers_soft_limit: int | None = None


def raise_open_files() -> tuple[int, int]:
    """Set the soft open-file limit to the hard one; the (soft, hard) limit now in force."""
    global _callers_soft_limit
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft == resource.RLIM_INFINITY or soft >= hard:
        return soft, hard
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        return soft, hard
    _callers_soft_limit = soft
    return hard, hard


def with_callers_limit(argv: list[str]) -> list[str]:
    """``argv``, started with the soft open-file limit envd itself was started with.

    Through the shell's ``ulimit -S -n``: put in front of the script of a shell's ``-c``
    (every command of the library's wrapper), else in a ``/bin/sh`` around the program
    (about half a millisecond, spent in the child).  ``preexec_fn`` would cost the event loop
    several milliseconds per start (it rules out ``vfork``).  Unchanged when envd kept its
    limit.
    """
    if _callers_soft_limit is None:
        return argv
    limit = f"ulimit -S -n {_callers_soft_limit} 2>/dev/null; "
    if len(argv) >= 3 and argv[1] == "-c" and posixpath.basename(argv[0]) in _SHELLS:
        # A shell's own script (every command of the library's wrapper): the limit goes in
        # front of it, on the same line, which saves starting a second shell per command.
        return [argv[0], "-c", limit + argv[2], *argv[3:]]
    return ["/bin/sh", "-c", limit + 'exec "$@"', "sh", *argv]
