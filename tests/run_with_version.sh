#!/usr/bin/env bash
# Run some tests under another release of one dependency, without touching the project's
# virtualenv: that release (and what it needs) goes into a throwaway `pip install --target`
# overlay that is put first on PYTHONPATH.
#
#   tests/run_with_version.sh e2b 2.15.2 -m e2b_sdk tests/ags tests/conformance/test_ags.py
#   tests/run_with_version.sh kubernetes 30.1.0 -k kubernetes tests/backends tests/conformance
#
# Everything after the version goes to pytest.  CI (scripts/test.sh) runs the oldest release
# each pin allows; the suite itself runs the newest.
set -euo pipefail
package="${1:?usage: $0 PACKAGE VERSION [pytest args...]}"
version="${2:?usage: $0 PACKAGE VERSION [pytest args...]}"
shift 2
root="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-$root/.venv/bin/python}"
overlay="$(mktemp -d "${TMPDIR:-/tmp}/$package-$version-XXXXXX")"
trap 'rm -rf "$overlay"' EXIT
"$python" -m pip install --quiet --disable-pip-version-check --target "$overlay" "$package==$version"
# The overlay may carry its own copies of shared libraries (httpx, urllib3, ...); those are
# what that release resolves with, so they win, as they would in a fresh install.
installed="$(PYTHONPATH="$overlay" "$python" -c "import importlib.metadata as m; print(m.version('$package'))")"
if [ "$installed" != "$version" ]; then
  echo "expected $package $version in the overlay, found $installed" >&2
  exit 1
fi
echo "running tests with $package $installed"
cd "$root"
PYTHONPATH="$overlay${PYTHONPATH:+:$PYTHONPATH}" "$python" -m pytest "$@"
