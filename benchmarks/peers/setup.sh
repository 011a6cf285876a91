#!/usr/bin/env bash
# Create the peer libraries' virtualenvs for benchmarks/bench_peers.py, one per peer, outside
# the repository: their dependency trees are large and unrelated to ours (and conflict with
# each other's pins), so the benchmark runs each one in its own interpreter as a worker.
#
#   <dir>/mini/bin/python     mini-swe-agent (the current release unless MINI_SWE_AGENT is set)
#   <dir>/swerex/bin/python   swe-rex 1.4.0 and aiohttp, which swe-rex's client imports
#                             without declaring it
#
# Then builds the SWE-ReX image (benchmarks/peers/build-swerex-image.sh).  Idempotent: an
# existing venv is upgraded in place to the requested versions.
# Usage: benchmarks/peers/setup.sh [dir]   (dir defaults to $SANDBOX_RUNTIME_PEERS or
# ~/.cache/sandbox-runtime/peers, where bench_peers.py looks too); then
#   python benchmarks/bench_peers.py [--peers-dir dir]
set -euo pipefail

dir="${1:-${SANDBOX_RUNTIME_PEERS:-$HOME/.cache/sandbox-runtime/peers}}"
python="${PYTHON:-python3}"
mini_spec="${MINI_SWE_AGENT:-mini-swe-agent}"
swerex_version="${SWEREX_VERSION:-1.4.0}"

mkdir -p "$dir"
for name in mini swerex; do
  [ -x "$dir/$name/bin/python" ] || "$python" -m venv "$dir/$name"
done
"$dir/mini/bin/python" -m pip install --quiet --upgrade "$mini_spec"
"$dir/swerex/bin/python" -m pip install --quiet "swe-rex==$swerex_version" aiohttp

PYTHON="$dir/swerex/bin/python" SWEREX_VERSION="$swerex_version" \
  "$(dirname "$0")/build-swerex-image.sh"
echo "peers ready in $dir:"
"$dir/mini/bin/python" -m pip show mini-swe-agent | grep -E '^(Name|Version)'
"$dir/swerex/bin/python" -m pip show swe-rex | grep -E '^(Name|Version)'
