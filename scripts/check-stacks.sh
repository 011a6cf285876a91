#!/usr/bin/env bash
# CI: each training stack resolves with the command docs/training.md gives for it, run with
# --dry-run (metadata only: no wheel is downloaded, so no GPU wheel's contents either), timed.
#
#   ./scripts/check-stacks.sh        # all three; prints "<stack>: resolved in N s"
#
# The lock files hold every package the stacks need from PyPI, so this needs PyPI and nothing
# else (rLLM and R2E-Gym, installed --no-deps from their checkouts afterwards, are not fetched).
# uv goes into a virtualenv of its own, .venv-stacks, which is also the (empty) target.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-stacks
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c 'import uv' 2>/dev/null \
  || "$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'uv>=0.9'
uv="$venv/bin/uv"
# The locks are for CPython 3.11 on x86_64 Linux, the training machines' platform, whatever
# python this machine has.
target=(--python "$venv/bin/python" --python-version 3.11 --python-platform x86_64-manylinux_2_28)

resolve() {  # resolve STACK COMMAND...: the documented command, with --dry-run
  local stack="$1" started=$SECONDS
  shift
  if ! "$@" --dry-run --quiet "${target[@]}" >"$venv/$stack.log" 2>&1; then
    cat "$venv/$stack.log" >&2
    echo "$stack: does not resolve" >&2
    return 1
  fi
  echo "$stack: resolved in $((SECONDS - started)) s"
}

# Each line is the install command of docs/training.md (tests/core/test_training_doc.py checks
# that the two say the same).
resolve stack-seeds "$uv" pip install -r requirements/stack-seeds.txt '.[all]'
resolve stack-main "$uv" pip install -r requirements/stack-main.txt '.[all]'
resolve stack-main-verl08 "$uv" pip install -r requirements/stack-main-verl08.txt \
  --override requirements/stack-main-verl08.overrides '.[all]'
# ... and the override is still what makes the verl 0.8.0 variant resolve (else drop it).
if "$uv" pip install -r requirements/stack-main-verl08.txt '.[all]' --dry-run --quiet \
  "${target[@]}" >/dev/null 2>&1; then
  echo "stack-main-verl08 resolves without rLLM's numpy override: drop the override" >&2
  exit 1
fi
