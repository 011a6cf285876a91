#!/usr/bin/env bash
# The Harbor tests under Harbor's current release, on a machine with only Python 3.11.
#
#   sudo bash scripts/harbor-e2e.sh [--prepare-only] [ROOT]   # ROOT: default ~/.cache/sandbox-runtime/harbor-trixie
#
# Every Harbor release requires Python >= 3.12 (docs/harnesses.md), which Debian 12 lacks, so
# this builds a Debian 13 (trixie, Python 3.13) chroot from Debian's mirror and installs
# Harbor's current PyPI release, this checkout ([docker,ags]) and its emulators there.  Then it
# runs, inside: tests/harnesses/test_harbor.py (the environment's methods over Harbor's real
# base class and trial objects) and tests/harnesses/test_harbor_runner.py (Harbor's own
# `harbor run`, oracle 1 and nop 0, on local, docker and the AGS emulator), with the host's
# Docker engine through its socket.  scripts/test.sh (CI) runs the preparation in the
# background during the main test run, then this.  --prepare-only: build and install, no tests.
# Needs root (debootstrap, unshare, chroot); the mounts live in a private mount namespace, so
# nothing stays mounted after it exits.  Idempotent: an existing chroot is reused, and Harbor
# is upgraded to the current release on each preparation.
set -euo pipefail
cd "$(dirname "$0")/.."
src="$(pwd)"
prepare_only=0
if [ "${1:-}" = "--prepare-only" ]; then prepare_only=1; shift; fi
root="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/sandbox-runtime/harbor-trixie}"

if [ ! -x "$root/usr/bin/python3" ]; then
  rm -rf "$root.partial"
  mkdir -p "$root.partial"
  debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,bubblewrap,ca-certificates \
    trixie "$root.partial" http://deb.debian.org/debian >"$root.debootstrap.log" 2>&1 \
    || { tail -20 "$root.debootstrap.log"; exit 1; }
  mv "$root.partial" "$root"
fi
# The host's name resolution and certificates (a proxy's CA, if any), and a plain pip config.
cp /etc/resolv.conf /etc/hosts "$root/etc/"
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$root/etc/pip.conf"
mkdir -p "$root/src" "$root/root"
touch "$root/run-docker.sock"

inside() {
  # The chroot's root must be a mount point for bubblewrap ("Failed to make / slave").
  unshare -m --propagation private bash -c '
    R=$1; mount --bind "$R" "$R"; mount -t proc proc "$R/proc"
    mount --rbind /dev "$R/dev"; mount --rbind /sys "$R/sys"
    mount --bind "$2" "$R/src"
    mount --bind /var/run/docker.sock "$R/run-docker.sock"
    exec chroot "$R" /usr/bin/env -i PATH=/opt/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      HOME=/root LANG=C.UTF-8 DOCKER_HOST=unix:///run-docker.sock \
      SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt LITELLM_LOCAL_MODEL_COST_MAP=True \
      SANDBOX_RUNTIME_CI="${SANDBOX_RUNTIME_CI:-}" SANDBOX_RUNTIME_HARBOR_TESTS=1 \
      PYTHONDONTWRITEBYTECODE=1 bash -c "$3"' bash "$root" "$src" "$1"
}

# Harbor (its newest release), this checkout and its emulators; uv installs in seconds.
inside '[ -x /opt/venv/bin/uv ] || { python3 -m venv /opt/venv && pip install -q "uv>=0.9"; }
  uv pip install -q --python /opt/venv/bin/python --upgrade harbor pytest pytest-timeout pytest-xdist
  uv pip install -q --python /opt/venv/bin/python --reinstall-package=sandbox-runtime-swe \
    --reinstall-package=sandbox-runtime-emulators "/src[docker,ags]" /src/emulators
  python -c "import importlib.metadata as m; print(\"harbor\", m.version(\"harbor\"), \"in the chroot\")"'
[ "$prepare_only" = 1 ] && exit 0

inside 'cd /src && python -m pytest -q -p no:cacheprovider tests/harnesses/test_harbor.py \
  tests/harnesses/test_harbor_runner.py -n 2 -p xdist'
