"""R2E-Gym's runtime on any backend: its ``RepoEnv``, its ``Agent`` and rLLM's ``SWEEnv`` unchanged.

R2E-Gym (and everything built on it: rLLM's ``rllm.env.name=swe`` environment, Graph Planner,
DeepSWE) reaches a sandbox through one class, ``r2egym.agenthub.runtime.docker.DockerRuntime``,
which ``RepoEnv`` builds itself and which knows only docker and kubernetes.
:class:`R2EGymRuntime` has the members that code uses (``run``, ``copy_to_container``,
``get_task_instruction``, ``_calculate_reward``, ``get_patch``, ``apply_patch``,
``reverse_patch``, ``run_tests``, ``checkout``, ``close`` and the attributes ``ds``,
``repo_name``, ``docker_image``, ``commit``) over a :class:`~sandbox_runtime.SandboxRuntime`, and
:func:`install` makes ``RepoEnv`` build it instead::

    from sandbox_runtime.integrations import r2egym
    r2egym.install(backend="ags", backend_options={"tool_name": "swe"})
    env = RepoEnv(EnvArgs(ds=row))          # R2E-Gym's own class, now on AGS

Without a backend, :func:`install` keeps the name ``RepoEnv`` passes (``docker``, rLLM's
default ``kubernetes``, or any backend of this library: rLLM's
``+rllm.env.env_args.backend=ags`` then works as is).

Where this runtime differs from R2E-Gym's, on purpose:

* preparation and grading are this library's (:mod:`sandbox_runtime.swe`), so the reward of
  an entry is the one ``sandbox-runtime run`` gives; a grading run that gives no verdict
  (sandbox gone, backend error, test timeout) raises
  :class:`~sandbox_runtime.swe.grading.GradingError` instead of returning 0;
* a sandbox that is gone raises :class:`~sandbox_runtime.SandboxError` from ``run`` instead
  of becoming an ``"Error: ..."`` observation (``RepoEnv`` still turns it into one for the
  agent's steps, and its ``compute_reward`` raises);
* R2E-Gym's tool scripts start with ``#!/root/.venv/bin/python``; on an image without that
  interpreter :meth:`~R2EGymRuntime.copy_to_container` rewrites the line to the image's
  ``python3``, and gives the editor a small ``chardet`` stand-in where the package is missing;
* where the destination is read-only (``/usr/local/bin`` of a ``local`` sandbox whose
  ``/usr`` is the host's), the script goes to a directory of the sandbox that every ``run``
  puts first on ``PATH``;
* a sandbox whose commands do not see its paths (``local`` with ``isolation="none"``) fails
  at start with :class:`~sandbox_runtime.ToolUnavailableError` saying to use
  ``isolation="namespace"``, an installed script that cannot run fails
  ``copy_to_container``, and a call of one the shell cannot find raises from ``run``: never a
  ``command not found`` output and a reward of 0;
* ``reset`` opens a fresh, prepared sandbox (R2E-Gym's restarts the container unprepared).
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
import shlex
import threading
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sandbox_runtime._core.results import ExecResult
from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.errors import ConfigError, SandboxReadOnlyError
from sandbox_runtime.swe.agents.tool_check import (
    NOT_FOUND_EXIT_CODES,
    require_sandbox_paths,
    require_tools,
)
from sandbox_runtime.swe.commit import ParsedCommit as _OwnParsedCommit
from sandbox_runtime.swe.grading import grade
from sandbox_runtime.swe.prepare import prepare
from sandbox_runtime.swe.rows import parse_row
from sandbox_runtime.swe.runner import RunOptions, task_sandbox_config
from sandbox_runtime.swe.task import Task

__all__ = [
    "TOOL_DIR",
    "TOOL_PATH_PRELUDE",
    "R2EGymRuntime",
    "ToolScripts",
    "install",
    "run_command",
    "strip_colours",
    "timeout_message",
    "tool_files",
    "uninstall",
]

logger = logging.getLogger("sandbox_runtime.r2egym")

#: R2E-Gym's default command timeout (``r2egym.agenthub.CMD_TIMEOUT``), seconds.
CMD_TIMEOUT = 120
#: Where tool scripts go when their destination is read-only; first on every command's PATH.
FALLBACK_BIN = "/tmp/.sandbox-runtime-r2egym/bin"
#: The directories R2E-Gym's images keep their interpreter in, before the image's own PATH.
_R2E_PATH = "/root/.venv/bin:/root/.local/bin:/root/.cargo/bin"
#: Where R2E-Gym's runtime puts its tool scripts (``RepoEnv.add_commands``).
TOOL_DIR = "/usr/local/bin"
#: The shell text every command starts with: where R2E-Gym's tools and interpreter are found.
TOOL_PATH_PRELUDE = f'PATH={FALLBACK_BIN}:{_R2E_PATH}:"$PATH"; export PATH'
_R2E_SHEBANG = b"#!/root/.venv/bin/python"
_ANSI = re.compile(r"\x1b\[[0-9;]*m|\r")
# Enough of chardet's API for R2E-Gym's file editor (``detect(data)["encoding"]``).
_CHARDET_STANDIN = '''"""chardet's detect() where chardet is missing: UTF-8 or Latin-1."""


def detect(data):
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return {"encoding": "latin-1", "confidence": 0.5, "language": ""}
    return {"encoding": "utf-8", "confidence": 0.99, "language": ""}
'''

if TYPE_CHECKING:
    _RuntimeBase = object
else:
    try:  # R2E-Gym's abstract base where R2E-Gym is installed, so isinstance checks pass
        from r2egym.agenthub.runtime.base import ExecutionEnvironment as _RuntimeBase
    except ImportError:
        _RuntimeBase = object


def _parsed_commit(payload: str) -> Any:
    """R2E-Gym's ``ParsedCommit`` where importable (its methods), else this library's."""
    try:
        from r2egym.commit_models.diff_classes import ParsedCommit
    except ImportError:
        return _OwnParsedCommit.model_validate_json(payload)
    return ParsedCommit(**json.loads(payload))


def run_command(
    sandbox: SandboxRuntime, command: str, *, timeout: float, cwd: str | None = None
) -> tuple[ExecResult, str]:
    """Run ``command`` as R2E-Gym's runtime runs it; returns the result and R2E-Gym's status.

    The status is ``"0"``, ``"Error: Exit code N"``, or ``"-1"`` when the command timed out
    (or exited 124, as ``timeout`` does). :data:`FALLBACK_BIN` and R2E-Gym's interpreter
    directories come first on ``PATH``.
    """
    result = sandbox.exec(f"{TOOL_PATH_PRELUDE}; {command}", cwd=cwd, timeout=timeout)
    if result.timed_out or result.exit_code == 124:
        return result, "-1"
    if result.exit_code != 0:
        return result, f"Error: Exit code {result.exit_code}"
    return result, "0"


def timeout_message(timeout: float) -> str:
    """What R2E-Gym's runtime says of a command that ran out of time."""
    return f"The command took too long to execute (>{timeout:g}s)"


def strip_colours(text: str) -> str:
    """Output without ANSI colour codes and carriage returns, as R2E-Gym cleans it."""
    return _ANSI.sub("", text)


def tool_files(scaffold: str = "r2egym") -> list[Path]:
    """R2E-Gym's tool scripts as rLLM gives them to ``RepoEnv`` (its ``R2EGYM_COMMAND_FILES``).

    Read from the installed R2E-Gym package; empty when R2E-Gym is not importable.
    """
    try:
        import r2egym
    except ImportError:
        return []
    tools = Path(r2egym.__file__).parent / "agenthub" / "tools"
    names = {
        "r2egym": ("r2egym/file_editor.py", "search.py", "r2egym/execute_bash.py", "finish.py"),
        "sweagent": ("str_replace_editor.py", "execute_bash.py", "submit.py"),
    }[scaffold]
    found = [tools / name for name in names]
    return found if all(path.is_file() for path in found) else []


class ToolScripts:
    """Puts R2E-Gym's tool scripts into a sandbox so that they run there as they are.

    The scripts start with ``#!/root/.venv/bin/python`` (R2E-Gym's images); elsewhere that
    line becomes the image's own ``python3``. The file editor imports ``chardet``: where the
    image lacks it, a stand-in module goes next to the script (Python puts a script's
    directory first on ``sys.path``). A destination the backend shows read-only (a ``local``
    sandbox's ``/usr``) is replaced by :data:`FALLBACK_BIN`, which commands run through
    :meth:`R2EGymRuntime.run` and :class:`~sandbox_runtime.integrations.rllm.SWEEnv` have
    first on ``PATH``.

    The scripts read absolute sandbox paths (``/testbed/...``) and are found by their
    sandbox path, so the first install checks that the sandbox's commands see sandbox paths
    (:func:`~sandbox_runtime.swe.agents.tool_check.require_sandbox_paths`: ``local`` with
    ``isolation="none"`` fails here, saying to use ``isolation="namespace"``), and
    :meth:`verify` checks that the installed scripts run from where calls look for them.
    """

    def __init__(self, sandbox: SandboxRuntime) -> None:
        self.sandbox = sandbox
        self.installed: set[str] = set()
        """The names of the executables installed, as calls name them."""
        self._python: str | None = None
        self._has_chardet: bool | None = None
        self._paths_checked = False

    def verify(self, names: Iterable[str] | None = None) -> None:
        """Raise :class:`~sandbox_runtime.ToolUnavailableError` unless the tools can run.

        ``names`` defaults to every executable installed so far.
        """
        require_tools(
            self.sandbox, self.installed if names is None else names, prelude=TOOL_PATH_PRELUDE
        )

    def install_all(self, scripts: Iterable[Path], dest_dir: str = TOOL_DIR) -> set[str]:
        """Install tool scripts named as ``RepoEnv`` names them, then :meth:`verify` them.

        ``file_editor.py`` becomes ``dest_dir/file_editor``; returns the names calls use.
        The one entry point for code that gives an agent R2E-Gym's tools (``SWEEnv``, the
        rLLM AgentFlow): raises :class:`~sandbox_runtime.ToolUnavailableError` where they
        cannot run, before any call.
        """
        names: set[str] = set()
        for script in scripts:
            name = script.stem if script.suffix == ".py" else script.name
            self.install(script, posixpath.join(dest_dir, name))
            names.add(name)
        self.verify(names)
        return names

    def install(self, source: Path, dest_path: str) -> str:
        """Copy one file (executable when it is a script); returns where it went."""
        if not self._paths_checked:
            require_sandbox_paths(self.sandbox, "R2E-Gym's tool scripts")
            self._paths_checked = True
        data = source.read_bytes()
        mode = source.stat().st_mode & 0o777 | (0o755 if data.startswith(b"#!") else 0)
        if data.startswith(_R2E_SHEBANG):
            python = self._interpreter()
            if python != "/root/.venv/bin/python":
                data = b"#!" + python.encode() + data[len(_R2E_SHEBANG) :]
        for target in (dest_path, posixpath.join(FALLBACK_BIN, posixpath.basename(dest_path))):
            try:
                self.sandbox.write_bytes(target, data, mode=mode)
            except SandboxReadOnlyError:
                logger.info("%s is read-only here: %s goes to %s", target, source, FALLBACK_BIN)
                continue
            if b"import chardet" in data and not self._chardet_available():
                standin = posixpath.join(posixpath.dirname(target), "chardet.py")
                self.sandbox.write_text(standin, _CHARDET_STANDIN)
            if mode & 0o111:
                self.installed.add(posixpath.basename(dest_path))
            return target
        raise SandboxReadOnlyError(f"no writable place for {dest_path}")  # pragma: no cover

    def _interpreter(self) -> str:
        if self._python is None:
            found = self.sandbox.exec(
                f'PATH={_R2E_PATH}:"$PATH"; for p in /root/.venv/bin/python "$(command -v '
                'python3)" "$(command -v python)"; do [ -x "$p" ] && echo "$p" && break; done',
                timeout=60,
            )
            self._python = found.stdout.strip() or "/usr/bin/env python3"
        return self._python

    def _chardet_available(self) -> bool:
        if self._has_chardet is None:
            probe = self.sandbox.exec(
                f"{shlex.quote(self._interpreter())} -c 'import chardet'", timeout=60
            )
            self._has_chardet = probe.ok
        return self._has_chardet


class R2EGymRuntime(_RuntimeBase):
    """R2E-Gym's ``DockerRuntime`` interface over any backend of this library.

    Arguments are ``DockerRuntime``'s; ``backend`` is a backend name of this library and
    ``backend_options`` its options; ``env`` adds variables to every command. ``command``
    and extra keyword arguments (docker's) are accepted and ignored. Starting, preparing and
    grading may raise :class:`~sandbox_runtime.SandboxError`.
    """

    def __init__(
        self,
        ds: Mapping[str, Any],
        repo_path: str = "/testbed",
        alt_path: str = "/root",
        docker_image: str | None = None,
        command: str | list[str] = "/bin/bash",
        logger: logging.Logger | None = None,
        backend: str = "docker",
        *,
        backend_options: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        step_timeout: float = CMD_TIMEOUT,
        reward_timeout: float = 300.0,
        **docker_kwargs: Any,
    ) -> None:
        if not ds:
            raise ConfigError("R2EGymRuntime needs the dataset entry (ds)")
        self.ds: dict[str, Any] = dict(ds)
        self.backend = backend
        self.repo_path = repo_path
        self.alt_path = alt_path
        self.command = command
        self.docker_kwargs = docker_kwargs
        self.logger = logger or logging.getLogger("sandbox_runtime.r2egym.runtime")
        task = parse_row(self.ds, index="ds")
        if docker_image:
            task = task.model_copy(update={"image": docker_image})
        if env:
            task = task.model_copy(update={"env": {**task.env, **env}})
        self.task: Task = task
        self.docker_image: str = docker_image or str(
            self.ds.get("docker_image") or self.ds.get("image_name") or task.image or ""
        )
        self.swebench_verified = task.format == "swebench"
        self.swesmith = task.format == "swesmith"
        self.repo_name: str = str(self.ds.get("repo_name") or self.ds.get("repo") or task.repo)
        commit_json = self.ds.get("parsed_commit_content") or self.ds.get("parsed_commit")
        self.commit: Any = _parsed_commit(str(commit_json)) if commit_json else None
        self.options = RunOptions(
            backend=backend,
            step_timeout=step_timeout,
            test_timeout=reward_timeout,
            backend_options=dict(backend_options or {}),
        )
        self._lock = threading.Lock()
        self.sandbox: SandboxRuntime = self._open()
        self._scripts = ToolScripts(self.sandbox)

    # -- lifecycle -----------------------------------------------------------------------

    def _open(self) -> SandboxRuntime:
        sandbox = SandboxRuntime(task_sandbox_config(self.task, self.options))
        try:
            sandbox.start()
            # R2E-Gym reads and runs everything by absolute path (/root/run_tests.sh, its
            # tools in /usr/local/bin): a sandbox whose commands see other paths fails here.
            require_sandbox_paths(sandbox, "R2E-Gym's runtime")
            prepare(self.task, sandbox)
            sandbox.base_commit(refresh=True)
        except BaseException:
            sandbox.close()
            raise
        self.logger.info("sandbox %s (%s) ready for %s", sandbox.id, self.backend, self.repo_name)
        return sandbox

    @property
    def container_name(self) -> str:
        """The sandbox's id (R2E-Gym names patch files after its container)."""
        return self.sandbox.id

    def reset(self) -> None:
        """Replace the sandbox with a fresh, prepared one."""
        with self._lock:
            self.sandbox.close()
            self.sandbox = self._open()
            self._scripts = ToolScripts(self.sandbox)

    def close(self) -> None:
        """Remove the sandbox; harmless to call twice."""
        self.sandbox.close()

    def __enter__(self) -> R2EGymRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"R2EGymRuntime({self.repo_name!r}, backend={self.backend!r}, {self.sandbox.id})"

    # -- commands ------------------------------------------------------------------------

    def run(
        self,
        code: str,
        timeout: float = CMD_TIMEOUT,
        args: str = "",
        workdir: str | None = None,
        type: str | None = None,
    ) -> tuple[str, str]:
        """Run ``code args`` in ``workdir`` (the repository by default).

        Returns ``(output, "0")``, ``(output, "Error: Exit code N")``, or R2E-Gym's timeout
        message with ``"-1"``; stdout and stderr are one text, as R2E-Gym's are.
        """
        command = f"{code} {args}" if args else code
        result, status = run_command(
            self.sandbox, command, cwd=workdir or self.repo_path, timeout=timeout
        )
        self._tool_ran_or_raise(command, result)
        if status == "-1":
            return timeout_message(timeout), status
        return (strip_colours(result.output) if status == "0" else result.output), status

    def _tool_ran_or_raise(self, command: str, result: ExecResult) -> None:
        """Raise :class:`~sandbox_runtime.ToolUnavailableError` for an installed tool not run.

        A call of a tool :meth:`copy_to_container` installed that the shell could not run
        (exit 126/127 and the tool not runnable) is a fault, never an observation.
        """
        if result.exit_code not in NOT_FOUND_EXIT_CODES:
            return
        words = command.split(maxsplit=1)
        if words and words[0] in self._scripts.installed:
            self._scripts.verify([words[0]])

    def demux_run(
        self, code: str, timeout: float = CMD_TIMEOUT, args: str = "", workdir: str | None = None
    ) -> tuple[str, str, str]:
        """Like :meth:`run`, with stdout and stderr apart: ``(stdout, stderr, code)``."""
        command = f"{code} {args}" if args else code
        result, status = run_command(
            self.sandbox, command, cwd=workdir or self.repo_path, timeout=timeout
        )
        self._tool_ran_or_raise(command, result)
        if status == "-1":
            return "", timeout_message(timeout), status
        return result.stdout, result.stderr, status

    # -- files ---------------------------------------------------------------------------

    def copy_to_container(self, src_path: str, dest_path: str) -> None:
        """Copy a host file or directory to ``dest_path`` in the sandbox.

        A script for R2E-Gym's interpreter gets the image's Python instead where
        ``/root/.venv/bin/python`` is missing; a read-only destination is replaced by
        :data:`FALLBACK_BIN` (see :class:`ToolScripts`). An executable that commands then
        cannot run raises :class:`~sandbox_runtime.ToolUnavailableError`.
        """
        source = Path(src_path)
        if source.is_dir():
            self.sandbox.upload(source, dest_path)
            return
        self._scripts.install(source, dest_path)
        name = posixpath.basename(dest_path)
        if name in self._scripts.installed:
            self._scripts.verify([name])

    def read_file(self, rel_file_path: str) -> str:
        """A file under ``alt_path`` (where R2E-Gym keeps what the agent must not see)."""
        output, _ = self.run(f"cat {shlex.quote(posixpath.join(self.alt_path, rel_file_path))}")
        return output

    def create_file(self, file_path: str, content: str) -> None:
        """Write ``content`` at ``/file_path``."""
        self.sandbox.write_text("/" + file_path.lstrip("/"), content)

    # -- the repository ------------------------------------------------------------------

    def get_task_instruction(self) -> str:
        """The issue: the text inside ``[ISSUE]...[/ISSUE]`` when the entry has those tags."""
        statement = str(self.ds.get("problem_statement", ""))
        found = re.search(r"\[ISSUE\](.*)\[/ISSUE\]", statement, re.DOTALL)
        return found.group(1) if found else statement

    def get_patch(self) -> str:
        """Every change in the repository, new files included, as a diff."""
        output, _ = self.run("git add -A && git diff --cached")
        return output

    def apply_patch(self, patch: str) -> tuple[str, str]:
        """``git apply`` a patch in the repository; ``run``'s result."""
        return self._git_apply(patch, "--whitespace=fix")

    def reverse_patch(self, patch: str) -> tuple[str, str]:
        """``git apply -R`` a patch in the repository; ``run``'s result."""
        return self._git_apply(patch, "-R")

    def _git_apply(self, patch: str, flag: str) -> tuple[str, str]:
        path = f"/tmp/{self.sandbox.id}_{uuid.uuid4().hex}.patch"
        self.sandbox.write_text(path, patch)
        try:
            return self.run(f"git apply {flag} {path}")
        finally:
            self.sandbox.remove(path)

    def checkout(self, commit_hash: str) -> tuple[str, str]:
        """``git checkout`` in the repository."""
        return self.run(f"git checkout {shlex.quote(commit_hash)}")

    def run_tests(self, timeout: float = 300) -> tuple[str, str]:
        """R2E-Gym's ``run_tests.sh`` as the agent could run it (colour codes removed)."""
        output, code = self.run(f"bash {self.alt_path}/run_tests.sh", timeout=timeout)
        return strip_colours(output), code

    def demux_run_tests(self) -> tuple[str, str, str]:
        """:meth:`run_tests` with stdout and stderr apart."""
        stdout, stderr, code = self.demux_run(f"bash {self.alt_path}/run_tests.sh")
        return strip_colours(stdout), strip_colours(stderr), code

    def _calculate_reward(
        self, get_test_output: bool = False, timeout: float = 300
    ) -> float | tuple[float, str]:
        """Grade the repository by the entry's tests: 1.0 or 0.0.

        Raises :class:`~sandbox_runtime.swe.grading.GradingError` when the tests gave no
        verdict, so an infrastructure fault is never a reward of 0.
        """
        result = grade(self.task, self.sandbox, timeout=timeout)
        reward = result.reward_or_raise()
        return (reward, result.test_output) if get_test_output else reward

    # R2E-Gym's git helpers for agents that commit after each step.
    def start_new_branch(self, branch_name: str = "exp") -> tuple[str, str]:
        """Record the current commit (R2E-Gym does not branch either)."""
        self.run("git config --global user.email 'you@example.com'")
        self.run("git config --global user.name 'Your Name'")
        output, code = self.run("git rev-parse HEAD")
        self.current_commit = output.strip()
        return output, code

    def commit_after_step(self, step_idx: int) -> tuple[str, str]:
        """Commit everything, named after the step."""
        self.run("git add .")
        return self.run(f"git commit -m '{int(step_idx)}'")

    def undo_last_commit(self) -> tuple[str, str]:
        """Drop the last commit and its changes."""
        return self.run("git reset --hard HEAD~1")

    def get_current_commit_hash(self) -> str:
        """``git rev-parse HEAD``."""
        output, _ = self.run("git rev-parse HEAD")
        return output.strip()

    def soft_git_reset(self) -> tuple[str, str]:
        """Back to the commit :meth:`start_new_branch` recorded, keeping the changes."""
        return self.run(f"git reset --soft {self.current_commit}")


# -- install ---------------------------------------------------------------------------

_install_lock = threading.Lock()
_originals: dict[str, Any] = {}
_R2E_MODULES = ("r2egym.agenthub.environment.env", "r2egym.agenthub.runtime.docker")


def install(
    backend: str | None = None,
    backend_options: Mapping[str, Any] | None = None,
    *,
    step_timeout: float | None = None,
) -> type[R2EGymRuntime]:
    """Make R2E-Gym build :class:`R2EGymRuntime` wherever it builds ``DockerRuntime``.

    ``backend`` replaces the name ``RepoEnv`` passes (its ``backend`` argument; rLLM's
    ``env_args.backend``) when given; ``backend_options`` go to every sandbox. Idempotent;
    call it in every process that builds environments (for Ray workers, from a
    ``worker_process_setup_hook``). Raises :class:`~sandbox_runtime.ConfigError` when
    R2E-Gym is not importable. Returns the class installed.
    """
    import importlib

    modules = []
    for name in _R2E_MODULES:
        try:
            modules.append(importlib.import_module(name))
        except ImportError as exc:
            raise ConfigError(
                f"sandbox_runtime.integrations.r2egym.install needs R2E-Gym ({name}): {exc}"
            ) from exc
    fixed_options = dict(backend_options or {})

    class InstalledRuntime(R2EGymRuntime):
        """:class:`R2EGymRuntime` with the backend and options given to :func:`install`."""

        def __init__(self, ds: Mapping[str, Any], *args: Any, **kwargs: Any) -> None:
            if backend is not None:
                kwargs["backend"] = backend
            kwargs.setdefault("backend_options", fixed_options)
            if step_timeout is not None:
                kwargs.setdefault("step_timeout", step_timeout)
            super().__init__(ds, *args, **kwargs)

    InstalledRuntime.__name__ = InstalledRuntime.__qualname__ = "DockerRuntime"
    with _install_lock:
        for module in modules:
            _originals.setdefault(module.__name__, getattr(module, "DockerRuntime"))  # noqa: B009
            setattr(module, "DockerRuntime", InstalledRuntime)  # noqa: B010
    return InstalledRuntime


def uninstall() -> None:
    """Give R2E-Gym its own ``DockerRuntime`` back."""
    import sys

    with _install_lock:
        for name, original in _originals.items():
            module = sys.modules.get(name)
            if module is not None:
                setattr(module, "DockerRuntime", original)  # noqa: B010
        _originals.clear()
