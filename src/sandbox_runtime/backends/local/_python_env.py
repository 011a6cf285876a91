"""Each local sandbox's own Python environment, so installs never reach the host's interpreter.

A task's setup and its harness's eval script run ``python -m pip install -e .``.  On ``local``
that ``python`` is the host's: with ``isolation="none"`` the sandbox's tree was installed into
the user's venv (two gradings of one repository then imported each other's code), and with
``isolation="namespace"`` the install failed on the read-only host and the tests imported the
machine's installed copy of the package instead of the sandbox's tree.

So every sandbox gets a virtual environment of its own at :data:`VENV` (``/.sandbox-runtime/
python``, in the sandbox's root), first on every command's ``PATH``:

* it is made by hand, not by ``python -m venv``: ``pyvenv.cfg``, ``bin/python*`` links to the
  host interpreter's base executable and an empty ``site-packages``, which is all a venv is to
  the interpreter (PEP 405); about a millisecond, against 40 to 80 ms for a ``venv`` process;
* it sees the host's packages, after its own, and no others: the base interpreter's
  site-packages through ``include-system-site-packages`` only where the host's ``python`` sees
  them (not a venv, or one made with ``--system-site-packages``), and the host venv's
  site-packages and the user site (where the host's ``python`` has them) through a ``.pth``
  file that sorts after every other, so a package installed in the sandbox always comes
  first and pytest, pip and the rest still run
  (an editable install's import finder, which setuptools puts after the path finder, is moved
  before it, or a flat-layout package the host also has would be imported from the host);
* the host's console scripts written for its ``python`` (``pytest``, ``pip``) get a two-line
  shim in the sandbox's ``bin`` that runs them with the sandbox's interpreter, so ``pytest``
  imports what the sandbox installed;
* pip's other ways out are closed in the environment of commands: ``PIP_USER``,
  ``PIP_TARGET``, ``PIP_PREFIX`` and ``PIP_ROOT`` are dropped (and ``PIP_USER=0`` set, over a
  ``pip.conf`` that asks for ``--user``), the user site is the sandbox's
  (``PYTHONUSERBASE``), and pip's cache is in the sandbox.  pip refuses to uninstall a
  distribution outside the environment it installs into, so an upgrade of a host package
  installs the new version in the sandbox and leaves the host's alone.

An image's own environment still wins where its scripts activate one (a SWE-bench image's
``conda activate testbed`` puts its venv first on ``PATH``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import shutil
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["VENV", "HostPython", "command_env", "host_python", "make_venv"]

logger = logging.getLogger("sandbox_runtime.local")

#: Where a sandbox's own environment is, as a sandbox path.
VENV = "/.sandbox-runtime/python"
_USER_BASE = "/.sandbox-runtime/user"
_PIP_CACHE = "/.sandbox-runtime/pip-cache"
#: Sorts after every other ``.pth`` (``__editable__...``, ``easy-install``, ``distutils-...``).
_HOST_PTH = "~sandbox-runtime-host.pth"
_HOST_MODULE = "_sandbox_runtime_host_site"
# Run at start-up by the .pth above, after every other .pth of the sandbox's site-packages.
# The host's directories come after the sandbox's own; a finder of an editable install made
# in the sandbox (setuptools appends it to sys.meta_path, after the path finder) is moved
# before the path finder, so a copy of the same package in the host's directories never wins.
_HOST_SITE = """import os, site, sys
_own = os.path.dirname(os.path.abspath(__file__))
for _dir in {sites}:
    site.addsitedir(_dir)
_mine = [f for f in sys.meta_path
         if os.path.dirname(getattr(sys.modules.get(getattr(f, "__module__", "")), "__file__", "")
                            or "") == _own]
if _mine:
    _rest = [f for f in sys.meta_path if f not in _mine]
    _at = next((i for i, f in enumerate(_rest) if getattr(f, "__name__", "") == "PathFinder"),
               len(_rest))
    sys.meta_path[:] = _rest[:_at] + _mine + _rest[_at:]
"""
#: pip settings that would send an install outside the sandbox's environment.
_PIP_WAYS_OUT = ("PIP_TARGET", "PIP_PREFIX", "PIP_ROOT", "PIP_USER", "PYTHONHOME")
_SHEBANG_BYTES = 256

_PROBE = """
import json, os, site, sys
venv = sys.prefix != sys.base_prefix
print(json.dumps({
    "base": os.path.realpath(getattr(sys, "_base_executable", sys.executable)),
    "executable": sys.executable,
    "prefixes": sorted({os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)}),
    "version": "%d.%d" % sys.version_info[:2],
    "full_version": "%d.%d.%d" % sys.version_info[:3],
    "venv_site": site.getsitepackages([sys.prefix]) if venv else [],
    "system_site": not venv or os.path.realpath(sys.base_prefix) in {
        os.path.realpath(p) for p in site.PREFIXES},
    "user_site": site.getusersitepackages() if site.ENABLE_USER_SITE else None,
    "user_bin": os.path.join(site.getuserbase(), "bin"),
}))
"""


@dataclass(frozen=True)
class HostPython:
    """What a sandbox's environment is built from: the host's ``python`` on ``PATH``."""

    executable: str
    """The ``python3`` the host's ``PATH`` finds (perhaps a venv's)."""
    base: str
    """The real interpreter behind it, which the sandbox's ``bin/python`` links to."""
    version: str
    """``3.11``: the ``lib/python<version>`` directory name."""
    full_version: str
    host_sites: tuple[str, ...]
    """The host venv's site-packages and the user site, seen after the sandbox's own."""
    shims: tuple[tuple[str, str], ...]
    """``(name, shim text)`` for each host console script written for this ``python``."""
    prefixes: tuple[str, ...] = ()
    """The interpreter's installation and the venv (``sys.base_prefix``, ``sys.prefix``)."""
    system_site: bool = True
    """Whether the host's ``python`` sees the base interpreter's site-packages.

    A venv made without ``--system-site-packages`` does not; its sandboxes must not either,
    or the tests there import packages the host's own test run never sees (a pytest plugin
    there is loaded by every pytest run: hypothesis's, 1.4 s of each run on this machine).
    """

    def directories(self) -> list[str]:
        """Every host directory the sandbox's environment reads, outermost first, no nesting.

        A namespace sandbox must see these (read-only) wherever they live, even in a
        directory the sandbox has its own of (``/root/.pyenv``, a checkout in ``/tmp``).
        """
        wanted = [*self.prefixes, *self.host_sites, os.path.dirname(self.executable)]
        kept: list[str] = []
        for path in sorted(dict.fromkeys(os.path.realpath(p) for p in wanted), key=len):
            if os.path.isdir(path) and not any(path.startswith(k.rstrip("/") + "/") for k in kept):
                kept.append(path)
        return kept


_lock = threading.Lock()
_probed: dict[str, HostPython | None] = {}


def host_python(path: str) -> HostPython | None:
    """The host's ``python3`` on ``path`` (a ``PATH`` value), probed once per process."""
    found = shutil.which("python3", path=path) or shutil.which("python", path=path)
    if found is None:
        return None
    with _lock:
        if found not in _probed:
            _probed[found] = _probe(found)
        return _probed[found]


def _probe(executable: str) -> HostPython | None:
    try:
        done = subprocess.run(
            [executable, "-c", _PROBE], capture_output=True, timeout=30, check=True, text=True
        )
        facts = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        logger.warning("local backend: no own Python environment for sandboxes: %s", exc)
        return None
    sites = [str(s) for s in facts["venv_site"] if os.path.isdir(s)]
    if facts["user_site"] and os.path.isdir(facts["user_site"]):
        sites.append(str(facts["user_site"]))
    # A launcher (pyenv's shims) runs another executable: its folder holds the scripts.
    real = str(facts["executable"])
    targets = {executable, os.path.realpath(executable), real, os.path.realpath(real)}
    targets.add(str(facts["base"]))
    folders = [os.path.dirname(executable), os.path.dirname(real), str(facts["user_bin"])]
    return HostPython(
        executable=executable,
        base=str(facts["base"]),
        version=str(facts["version"]),
        full_version=str(facts["full_version"]),
        host_sites=tuple(sites),
        shims=tuple(_shims(list(dict.fromkeys(folders)), targets)),
        prefixes=tuple(str(p) for p in facts.get("prefixes", ())),
        system_site=bool(facts.get("system_site", True)),
    )


def _shims(folders: list[str], interpreters: set[str]) -> list[tuple[str, str]]:
    """A shim per script in ``folders`` whose ``#!`` names one of ``interpreters``."""
    shims: dict[str, str] = {}
    for folder in folders:
        with contextlib.suppress(OSError), os.scandir(folder) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                if entry.name in shims or entry.name.startswith(("python", "activate")):
                    continue
                args = _python_shebang(entry.path, interpreters)
                if args is not None:
                    shims[entry.name] = _shim(entry.path, args)
    return sorted(shims.items())


def _python_shebang(path: str, interpreters: set[str]) -> list[str] | None:
    """The interpreter's arguments when ``path`` is a script for one of ``interpreters``."""
    try:
        if not os.access(path, os.X_OK) or not os.path.isfile(path):
            return None
        with open(path, "rb") as handle:
            first = handle.read(_SHEBANG_BYTES).split(b"\n", 1)[0]
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode(errors="replace").split()
    if not words:
        return None
    interpreter = words[0]
    if interpreter in interpreters or os.path.realpath(interpreter) in interpreters:
        return words[1:]
    return None


def _shim(script: str, args: list[str]) -> str:
    """Run the host's ``script`` with the ``python`` beside the shim (the sandbox's)."""
    quoted = " ".join(shlex.quote(a) for a in [*args, script])
    return f'#!/bin/sh\nexec "${{0%/*}}/python" {quoted} "$@"\n'


def make_venv(root: Path, host: HostPython) -> None:
    """Write the sandbox's environment under ``root`` (the sandbox's ``/``)."""
    venv = root / VENV.lstrip("/")
    bin_dir = venv / "bin"
    site = venv / "lib" / f"python{host.version}" / "site-packages"
    site.mkdir(parents=True)
    bin_dir.mkdir()
    (venv / "lib64").symlink_to("lib")  # a platlibdir of lib64 (Fedora) installs there
    (root / _USER_BASE.lstrip("/")).mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(
        f"home = {os.path.dirname(host.base)}\n"
        f"include-system-site-packages = {'true' if host.system_site else 'false'}\n"
        f"version = {host.full_version}\n",
        encoding="utf-8",
    )
    for name in ("python", "python3", f"python{host.version}"):
        (bin_dir / name).symlink_to(host.base)
    if host.host_sites:
        (site / f"{_HOST_MODULE}.py").write_text(
            _HOST_SITE.format(sites=repr(list(host.host_sites))), encoding="utf-8"
        )
        (site / _HOST_PTH).write_text(f"import {_HOST_MODULE}\n", encoding="utf-8")
    for name, text in host.shims:
        shim = bin_dir / name
        shim.write_text(text, encoding="utf-8")
        shim.chmod(0o755)


def command_env(env: dict[str, str], seen_root: str, given: Mapping[str, str]) -> None:
    """Point a command's ``env`` at the sandbox's environment.

    ``seen_root`` is the sandbox's ``/`` as commands see it: ``/`` under namespace
    isolation, the root's host path under ``none``.  ``given`` is what the caller set for
    this command (the sandbox's and the call's ``env``): kept as it is, except that a ``PATH``
    given still gets the sandbox's ``bin`` in front, so no ``PATH`` reaches the host's pip.
    """
    venv = os.path.join(seen_root, VENV.lstrip("/"))
    bin_dir = os.path.join(venv, "bin")
    for name in _PIP_WAYS_OUT:
        if name not in given:
            env.pop(name, None)
    path = env.get("PATH", os.defpath)
    if path.split(os.pathsep, 1)[0] != bin_dir:
        env["PATH"] = os.pathsep.join([bin_dir, path])
    own = {
        "VIRTUAL_ENV": venv,
        "PIP_USER": "0",
        "PYTHONUSERBASE": os.path.join(seen_root, _USER_BASE.lstrip("/")),
        "PIP_CACHE_DIR": os.path.join(seen_root, _PIP_CACHE.lstrip("/")),
    }
    for name, value in own.items():
        if name not in given:
            env[name] = value
