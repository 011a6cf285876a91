#!/usr/bin/env bash
# Write the training stacks' lock files, requirements/stack-*.txt, from their inputs
# requirements/stack-*.in (run it after editing an input, and commit the .txt files).
#
#   RLLM_SEEDS_DIR=~/src/rllm-4762 RLLM_MAIN_DIR=~/src/rllm ./scripts/lock-stacks.sh
#
# RLLM_SEEDS_DIR is an rLLM checkout at 4762c2dd, RLLM_MAIN_DIR one at 9beb6e0f (docs/training.md
# says how to get both): rLLM is not on PyPI, so its dependencies are read from its
# pyproject.toml and locked here, and rLLM itself is installed --no-deps afterwards.
# Needs uv (pip install uv); resolves against PyPI for CPython 3.11 on x86_64 Linux (glibc 2.28+),
# the training machines' platform, whatever machine runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${RLLM_SEEDS_DIR:?an rLLM checkout at 4762c2dd}" "${RLLM_MAIN_DIR:?an rLLM checkout at 9beb6e0f}"
SANDBOX_RUNTIME_ROOT="$(pwd)"
RLLM_SEEDS_DIR="$(cd "$RLLM_SEEDS_DIR" && pwd)"
RLLM_MAIN_DIR="$(cd "$RLLM_MAIN_DIR" && pwd)"
export SANDBOX_RUNTIME_ROOT RLLM_SEEDS_DIR RLLM_MAIN_DIR
uv="${UV:-uv}"

lock() {  # lock NAME [extra uv arguments]
  local name="$1"
  shift
  local started=$SECONDS
  "$uv" pip compile --quiet --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
    --index-url https://pypi.org/simple \
    --no-emit-package sandbox-runtime-swe --no-emit-package rllm \
    --no-emit-package rllm-model-gateway \
    --custom-compile-command "scripts/lock-stacks.sh" \
    "$@" "requirements/$name.in" -o "requirements/$name.txt"
  echo "requirements/$name.txt: $(grep -c '==' "requirements/$name.txt") pins in $((SECONDS - started)) s"
}

lock stack-seeds
lock stack-main --override requirements/stack-main.overrides
lock stack-main-verl08 --override requirements/stack-main-verl08.overrides
