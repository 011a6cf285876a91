#!/usr/bin/env bash
# Run the e2b-protocol tests (marker e2b_sdk) under another e2b release, without touching
# the project's virtualenv: that e2b (and what it needs) goes into a throwaway
# `pip install --target` overlay that is put first on PYTHONPATH.
#
#   tests/ags/run_with_e2b_version.sh 2.15.2            # oldest of the supported range
#   tests/ags/run_with_e2b_version.sh 2.24.0 -x -q      # extra pytest arguments follow
#
# Tests of the ags backend itself check the e2b version and are only meaningful inside the
# supported range (e2b>=2.15.2,<2.25); the raw-SDK tests also pass with newer releases.
set -euo pipefail
version="${1:?usage: $0 E2B_VERSION [pytest args...]}"
shift
root="$(cd "$(dirname "$0")/../.." && pwd)"
python="${PYTHON:-$root/.venv/bin/python}"
overlay="$(mktemp -d "${TMPDIR:-/tmp}/e2b-$version-XXXXXX")"
trap 'rm -rf "$overlay"' EXIT
"$python" -m pip install --quiet --disable-pip-version-check --target "$overlay" "e2b==$version"
# The overlay may carry its own copies of shared libraries (httpx, protobuf, ...); those
# are what that e2b release resolves with, so they win, as they would in a fresh install.
installed="$(PYTHONPATH="$overlay" "$python" -c 'import importlib.metadata as m; print(m.version("e2b"))')"
if [ "$installed" != "$version" ]; then
  echo "expected e2b $version in the overlay, found $installed" >&2
  exit 1
fi
echo "running the e2b_sdk tests with e2b $installed"
cd "$root"
PYTHONPATH="$overlay${PYTHONPATH:+:$PYTHONPATH}" "$python" -m pytest -m e2b_sdk tests/ags tests/conformance/test_ags.py "$@"
