#!/usr/bin/env bash
# The main job on a fresh machine, in any shell: the ten bundled SWE tasks on the embedded
# `local` backend, graded by their own tests (the oracle agent: every reward 1).
#
#   ./scripts/main.sh                    # report.json and trajectories.jsonl in this directory
#   ./scripts/main.sh --agent null       # extra arguments go to `sandbox-runtime run`
#
# It uses the project's virtualenv (.venv, made with the core install if missing), never the
# shell's own python or pip, so an activated venv, a plain `python3` or an externally managed
# system python all work the same.
set -euo pipefail
cd "$(dirname "$0")/.."

python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  if ! "$python" -m venv .venv >/dev/null 2>&1; then
    rm -rf .venv
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      # Debian and Ubuntu ship venv separately from python3.
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
      "$python" -m venv .venv
    else
      echo "main.sh: '$python -m venv' failed; install python3-venv (Debian/Ubuntu) and retry" >&2
      exit 1
    fi
  fi
fi
if ! .venv/bin/python -c 'import sandbox_runtime' 2>/dev/null; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check .
fi
exec .venv/bin/sandbox-runtime run bundled --backend local --agent oracle -j 2 \
  --report report.json --trajectories trajectories.jsonl "$@"
