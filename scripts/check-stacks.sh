#!/usr/bin/env bash
# CI: each training stack resolves with the install command docs/training.md gives for it, run
# here with --dry-run (metadata only: no wheel is downloaded, so no GPU wheel's contents), timed.
#
#   ./scripts/check-stacks.sh        # prints "<stack>: resolved in N s" for each
#
# The lock files hold every package the stacks take from PyPI, so this needs PyPI and nothing
# else (rLLM and R2E-Gym, installed --no-deps from their checkouts afterwards, are not fetched).
# The venv is the docs' .venv-train, left empty: uv only goes into it.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv-train/bin/python ] || python3 -m venv .venv-train
export PATH="$PWD/.venv-train/bin:$PATH" VIRTUAL_ENV="$PWD/.venv-train"
command -v uv >/dev/null || python -m pip install 'uv>=0.9' --quiet --disable-pip-version-check
# The locks are for CPython 3.11 on x86_64 Linux, the training machines' platform, whatever
# python this machine has.
target=(--python-version 3.11 --python-platform x86_64-manylinux_2_28)

resolve() {  # resolve STACK COMMAND...: the documented command, with --dry-run
  local stack="$1" started=$SECONDS
  shift
  if ! "$@" --dry-run --quiet "${target[@]}" >".venv-train/$stack.log" 2>&1; then
    cat ".venv-train/$stack.log" >&2
    echo "$stack: does not resolve" >&2
    return 1
  fi
  echo "$stack: resolved in $((SECONDS - started)) s"
}

# Each line is an install command of docs/training.md, verbatim (tests/core/test_training_doc.py
# checks that every command there is run here, by a test, or marked GPU-only / off-CI).
resolve stack-seeds uv pip install -r requirements/stack-seeds.txt '.[all]'
resolve stack-main uv pip install -r requirements/stack-main.txt '.[all]'
resolve stack-main-verl08 uv pip install -r requirements/stack-main-verl08.txt --override requirements/stack-main-verl08.overrides '.[all]'
# ... and the project's own test dependencies beside today's lock (its tests in the training
# venv; the other two locks hold rich 15 already, checked by hand on 2026-11-28).
resolve stack-main-test uv pip install -r requirements/stack-main.txt '.[all,test]'

# ... and the override is still what makes the verl 0.8.0 variant resolve (else drop it).
if uv pip install -r requirements/stack-main-verl08.txt '.[all]' --dry-run --quiet \
  "${target[@]}" >/dev/null 2>&1; then
  echo "stack-main-verl08 resolves without rLLM's numpy override: drop the override" >&2
  exit 1
fi

# The [train] extra (README, docs/training.md) with plain pip, as a user without uv installs
# it: its own venv with a current pip (26+ reads PEP 658 metadata instead of fetching wheels).
# --ignore-installed: resolve everything, as in a fresh venv.  Where this machine's pip
# configuration caps torch (/etc/xdg/pip), pip applies the cap; the pin (2.11.0) is under it.
[ -x .venv-train-pip/bin/python ] || python3 -m venv .venv-train-pip
.venv-train-pip/bin/python -m pip install --quiet --disable-pip-version-check 'pip>=26'
started=$SECONDS
if ! PATH="$PWD/.venv-train-pip/bin:$PATH" python -m pip install '.[train]' --dry-run --quiet \
  --disable-pip-version-check --ignore-installed --report .venv-train-pip/train.json \
  >.venv-train-pip/train.log 2>&1; then
  cat .venv-train-pip/train.log >&2
  echo "[train]: does not resolve with pip" >&2
  exit 1
fi
seconds=$((SECONDS - started))
echo "[train]: resolved by pip $(.venv-train-pip/bin/python -m pip --version | cut -d' ' -f2) in $seconds s" \
  "($(.venv-train-pip/bin/python -c 'import json; print(len(json.load(open(".venv-train-pip/train.json"))["install"]))') packages)"
# The goal is under 5 minutes (docs/training.md); a loaded machine can miss it with nothing
# wrong, so that only warns.
[ "$seconds" -le 300 ] || echo "[train]: WARNING: over the 5-minute goal; pin what pip backtracked on" >&2
