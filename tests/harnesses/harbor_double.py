"""A double of Harbor's ``harbor.environments.base``: its interface only (Harbor 0.26.0).

Every Harbor release requires Python 3.12 and its syntax, and the tests run on 3.11, where
Harbor does not import; test_harbor.py and the child process of the SIGKILL test put this
double in its place.  It reproduces ONLY the constructor's leading arguments, ``ExecResult``'s
fields and the abstract methods with their signatures, as read from Harbor 0.26.0's source.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from pydantic import BaseModel

__all__ = ["harbor_imports", "install_interface_double", "trial_arguments"]


def harbor_imports() -> bool:
    """Whether a real Harbor imports here (never true once the double stands in for it)."""
    installed = sys.modules.get("harbor.environments.base")
    if installed is not None:
        return not getattr(installed, "IS_INTERFACE_DOUBLE", False)
    try:
        return importlib.util.find_spec("harbor.environments.base") is not None and bool(
            __import__("harbor.environments.base")
        )
    except (ImportError, SyntaxError):
        return False


def trial_arguments(trial_dir: Path, image: str | None) -> tuple[Any, Any]:
    """``trial_paths`` and ``task_env_config`` for the constructor: Harbor's own where it imports.

    Under a real Harbor (Python 3.12+, CI's Debian 13 chroot) they are its ``TrialPaths`` and
    ``EnvironmentConfig``, which its base class reads; over the double, what the double keeps.
    """
    if harbor_imports():
        from harbor.models.task.config import EnvironmentConfig
        from harbor.models.trial.paths import TrialPaths

        trial_dir.mkdir(parents=True, exist_ok=True)
        return TrialPaths(trial_dir=trial_dir), EnvironmentConfig(
            docker_image=image, cpus=1, memory_mb=1024
        )
    return None, types.SimpleNamespace(docker_image=image, cpus=1, memory_mb=1024, env={})


def install_interface_double() -> None:
    """``harbor.environments.base`` as its interface only (Harbor 0.26.0)."""

    class ExecResult(BaseModel):
        stdout: str | None = None
        stderr: str | None = None
        return_code: int

    class BaseEnvironment(ABC):
        def __init__(
            self,
            environment_dir: Path,
            environment_name: str,
            session_id: str,
            trial_paths: Any,
            task_env_config: Any,
            logger: Any = None,
            *args: Any,
            **kwargs: Any,
        ) -> None:
            self.environment_dir = environment_dir
            self.environment_name = environment_name
            self.session_id = session_id
            self.trial_paths = trial_paths
            self.task_env_config = task_env_config
            self._validate_definition()

        @staticmethod
        @abstractmethod
        def type() -> str: ...

        @abstractmethod
        def _validate_definition(self) -> None: ...

        @abstractmethod
        async def start(self, force_build: bool) -> None: ...

        @abstractmethod
        async def stop(self, delete: bool) -> None: ...

        @abstractmethod
        async def upload_file(self, source_path: Path | str, target_path: str) -> None: ...

        @abstractmethod
        async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None: ...

        @abstractmethod
        async def download_file(self, source_path: str, target_path: Path | str) -> None: ...

        @abstractmethod
        async def download_dir(self, source_dir: str, target_dir: Path | str) -> None: ...

        @abstractmethod
        async def exec(
            self,
            command: str,
            cwd: str | None = None,
            env: dict[str, str] | None = None,
            timeout_sec: int | None = None,
            user: str | int | None = None,
        ) -> ExecResult: ...

    base = types.ModuleType("harbor.environments.base")
    base.IS_INTERFACE_DOUBLE = True  # type: ignore[attr-defined]
    base.BaseEnvironment = BaseEnvironment  # type: ignore[attr-defined]
    base.ExecResult = ExecResult  # type: ignore[attr-defined]
    sys.modules.setdefault("harbor", types.ModuleType("harbor"))
    sys.modules.setdefault("harbor.environments", types.ModuleType("harbor.environments"))
    sys.modules["harbor.environments.base"] = base
