"""R2E-Gym's own RepoEnv (and rLLM's SWEEnv on top of it) on any backend of this library.

    python examples/r2egym_repoenv.py --backend local --option isolation=namespace
    python examples/r2egym_repoenv.py --backend docker
    python examples/r2egym_repoenv.py --backend ags        # AGS credentials in the environment

Needs R2E-Gym installed (and rLLM for ``--rllm``; docs/training.md has the recipe). One
bundled R2E-Gym task goes through R2E-Gym's unmodified code: ``RepoEnv`` copies its tool
scripts in, R2E-Gym ``Action``s view the bug, fix it with R2E-Gym's file editor and finish,
and ``compute_reward`` grades it; a second episode does nothing and must score 0. Prints one
JSON line: the rewards and the observations' first lines.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from sandbox_runtime.integrations import r2egym
from sandbox_runtime.swe import read_rows
from sandbox_runtime.swe.dataset import load_rows

_OLD = '    if field:\n        fields.append("".join(field))'
_NEW = '    fields.append("".join(field))'


def _entry(sample: str) -> dict[str, Any]:
    tasks = read_rows(load_rows("bundled")).tasks
    task = next(t for t in tasks if sample in t.task_id and t.format == "r2e")
    return dict(task.source)


def _tool_files() -> list[str]:
    """The tools rLLM's SWE environment gives R2E-Gym's RepoEnv (its R2EGYM_COMMAND_FILES)."""
    import r2egym

    tools = Path(r2egym.__file__).parent / "agenthub" / "tools"
    names = ("r2egym/file_editor.py", "search.py", "r2egym/execute_bash.py", "finish.py")
    return [str(tools / name) for name in names]


def _actions(fix: bool) -> list[str]:
    view = (
        "<function=file_editor>\n<parameter=command>view</parameter>\n"
        "<parameter=path>/testbed/csvline/core.py</parameter>\n</function>"
    )
    replace = (
        "<function=file_editor>\n<parameter=command>str_replace</parameter>\n"
        "<parameter=path>/testbed/csvline/core.py</parameter>\n"
        f"<parameter=old_str>{_OLD}</parameter>\n<parameter=new_str>{_NEW}</parameter>\n"
        "</function>"
    )
    finish = "<function=finish>\n<parameter=command>submit</parameter>\n</function>"
    return [view, replace, finish] if fix else [view, finish]


def with_repoenv(entry: dict[str, Any], backend: str, fix: bool) -> dict[str, Any]:
    """R2E-Gym's RepoEnv, Action and reward, as R2E-Gym's own agent loop drives them."""
    from r2egym.agenthub.action import Action
    from r2egym.agenthub.environment.env import EnvArgs, RepoEnv

    env = RepoEnv(EnvArgs(ds=entry), backend=backend, verbose=False)
    try:
        env.add_commands(_tool_files())
        firsts = []
        for text in _actions(fix):
            observation, _, done, _ = env.step(Action.from_string(text))
            firsts.append(str(observation).splitlines()[0] if str(observation) else "")
        return {"reward": env.compute_reward(), "done": done, "observations": firsts}
    finally:
        env.close()


def with_rllm(entry: dict[str, Any], backend: str, fix: bool) -> dict[str, Any]:
    """rLLM's own SWE environment (rllm.env.name=swe), which builds R2E-Gym's RepoEnv."""
    from rllm.environments.swe.swe import SWEEnv

    env = SWEEnv(entry=entry, backend=backend)
    try:
        instruction, _ = env.reset()
        firsts = []
        for text in _actions(fix):
            observation, _, done, _ = env.step(text)
            firsts.append(observation.splitlines()[0] if observation else "")
        return {
            "reward": env.compute_final_reward(),
            "done": done,
            "issue_starts": instruction.strip()[:40],
            "observations": firsts,
        }
    finally:
        env.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="docker", help="a backend of this library")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--rllm", action="store_true", help="through rLLM's SWEEnv")
    parser.add_argument("--sample", default="csvline", help="bundled R2E-Gym task")
    args = parser.parse_args()
    options = dict(item.split("=", 1) for item in args.option)
    if args.backend == "local":
        # local sandboxes run the host's tools: put this interpreter (with pytest) first.
        os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    r2egym.install(backend=args.backend, backend_options=options)
    run = with_rllm if args.rllm else with_repoenv
    entry = _entry(args.sample)
    # RepoEnv passes rLLM's default "kubernetes" or its own "docker"; install()'s backend wins.
    fixed = run(entry, "kubernetes", fix=True)
    untouched = run(entry, "kubernetes", fix=False)
    ok = fixed["reward"] == 1.0 and untouched["reward"] == 0.0
    print(json.dumps({"ok": ok, "backend": args.backend, "fixed": fixed, "untouched": untouched}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
