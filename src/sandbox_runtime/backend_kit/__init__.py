"""The toolkit for backend authors: the contract, its request types and the shared helpers.

Everything a backend needs is exported here, and the built-in backends import from here
exactly what a third-party backend would; nothing else of this package is meant for them.

* The contract: :class:`Backend` (five primitives, generic over its :class:`BackendOptions`
  model), the :class:`ExecRequest` it receives and the :class:`ExecResult` it returns,
  :class:`Capability`, :class:`Availability`, :class:`SandboxInfo`, :class:`ReapedSandbox`.
* Commands: the wrapper that gives a command a process group and a token its kill finds
  (:func:`wrapped_argv`, :func:`new_token`, :func:`kill_group_script`, :data:`TOKEN_VAR`),
  the missing-working-directory check (:func:`check_cwd`) and bounded output
  (:class:`HeadTailBuffer`).
* Files: safe tar extraction on the host (:func:`extract_archive`, which refuses escapes and
  keeps nothing that gains privileges) and the archive writers (:func:`write_directory_archive`
  for uploads, which drops the same things; :func:`write_tree_archive` for a sandbox tree
  packed on the host, files with holes kept sparse).
* The agent's change from outside (``mark_tree`` / ``tree_changes``): the records
  (:class:`TreeMark`, :class:`TreeChanges`, :class:`TreeEntry`, :class:`TreeChange`) and the
  caller-side readers (:func:`entries_from_archive`, :func:`compare_trees`,
  :func:`watched_state`, :func:`relative`, :func:`ignored_in_tree`).
* Ownership and cleanup: :func:`make_labels` at create, :func:`why_reapable` in ``reap``,
  :func:`with_expiry` when a lease moves the end; the ``meta.json`` record of a directory
  that holds a sandbox or checkpoint (:func:`read_meta`, :func:`write_meta`,
  :func:`abandoned_without_record`).
* Checkpoints: :class:`Checkpoint` and :func:`checkpoint_labels`; for a backend with no
  snapshot of its own, :class:`ArchiveCheckpointStore` (the workdir and declared paths as a
  tar on the client's disk, restored in place or into a fresh sandbox of the same image).
* Lifetimes that move (``docs/leases.md``): the container timer that reads its end from a
  lease file (:func:`timer_argv`, :func:`write_end_script`, :func:`new_lease_key`,
  :func:`lease_file`).
* Control planes: :func:`call_with_retries` with a :class:`RetryPolicy`, and the shared
  :class:`RateLimiter` per plane (:func:`limiter_for`).
* Backends on backends: :func:`load_backend`, :func:`validate_options` and
  :func:`start_slot` (a member engine's start bound, held around its start).

The in-sandbox agent (exec and files in about a millisecond on container backends) is in
:mod:`sandbox_runtime.backend_kit.agent`, which needs ``httpx``; the conformance suite every
backend must pass is :mod:`sandbox_runtime.backend_kit.testing`, which needs ``pytest``.
``docs/writing-a-backend.md`` walks through all of it.
"""

from sandbox_runtime._core.archive import extract as extract_archive
from sandbox_runtime._core.archive import write_directory as write_directory_archive
from sandbox_runtime._core.archive import write_tree as write_tree_archive
from sandbox_runtime._core.archive_checkpoints import (
    CHECKPOINT_DIR_VAR,
    ArchiveCheckpointStore,
    ArchiveRecord,
    default_checkpoint_root,
)
from sandbox_runtime._core.backend import (
    Availability,
    Backend,
    Capability,
    ExecRequest,
    ReapedSandbox,
    SandboxInfo,
    ServiceQuota,
)
from sandbox_runtime._core.checkpoints import Checkpoint, checkpoint_labels
from sandbox_runtime._core.config import BackendOptions, SandboxConfig
from sandbox_runtime._core.lifetime import (
    lease_file,
    new_lease_key,
    timer_argv,
    write_end_script,
)
from sandbox_runtime._core.limits import start_slot
from sandbox_runtime._core.output import HeadTailBuffer
from sandbox_runtime._core.ownership import (
    LABEL_PREFIX,
    MANAGED,
    make_labels,
    why_reapable,
    with_expiry,
)
from sandbox_runtime._core.ratelimit import RateLimiter, limiter_for
from sandbox_runtime._core.records import abandoned_without_record, read_meta, write_meta
from sandbox_runtime._core.registry import load_backend
from sandbox_runtime._core.results import TIMEOUT_EXIT_CODE, ExecResult, FileInfo, FileType
from sandbox_runtime._core.retry import RetryPolicy, call_with_retries, retry_after_seconds
from sandbox_runtime._core.runtime import validate_options
from sandbox_runtime._core.shell import (
    TOKEN_VAR,
    check_cwd,
    kill_group_script,
    new_token,
    shell_text,
    wrapped_argv,
)
from sandbox_runtime._core.transfer import unpack as unpack_download
from sandbox_runtime._core.tree import Change as TreeChange
from sandbox_runtime._core.tree import (
    TreeChanges,
    TreeEntry,
    TreeMark,
    entries_from_archive,
    relative,
    watched_state,
)
from sandbox_runtime._core.tree import compare as compare_trees
from sandbox_runtime._core.tree import generic_changes as archive_tree_changes
from sandbox_runtime._core.tree import generic_mark as archive_tree_mark
from sandbox_runtime._core.tree import ignored as ignored_in_tree

__all__ = [
    "CHECKPOINT_DIR_VAR",
    "LABEL_PREFIX",
    "MANAGED",
    "TIMEOUT_EXIT_CODE",
    "TOKEN_VAR",
    "ArchiveCheckpointStore",
    "ArchiveRecord",
    "Availability",
    "Backend",
    "BackendOptions",
    "Capability",
    "Checkpoint",
    "ExecRequest",
    "ExecResult",
    "FileInfo",
    "FileType",
    "HeadTailBuffer",
    "RateLimiter",
    "ReapedSandbox",
    "RetryPolicy",
    "SandboxConfig",
    "SandboxInfo",
    "ServiceQuota",
    "TreeChange",
    "TreeChanges",
    "TreeEntry",
    "TreeMark",
    "abandoned_without_record",
    "archive_tree_changes",
    "archive_tree_mark",
    "call_with_retries",
    "check_cwd",
    "checkpoint_labels",
    "compare_trees",
    "default_checkpoint_root",
    "entries_from_archive",
    "extract_archive",
    "ignored_in_tree",
    "kill_group_script",
    "lease_file",
    "limiter_for",
    "load_backend",
    "make_labels",
    "new_lease_key",
    "new_token",
    "read_meta",
    "relative",
    "retry_after_seconds",
    "shell_text",
    "start_slot",
    "timer_argv",
    "unpack_download",
    "validate_options",
    "watched_state",
    "why_reapable",
    "with_expiry",
    "wrapped_argv",
    "write_directory_archive",
    "write_end_script",
    "write_meta",
    "write_tree_archive",
]
