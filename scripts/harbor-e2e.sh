#!/usr/bin/env bash
# Harbor's own runner on the Harbor environment, end to end, on a machine with only Python 3.11.
#
#   sudo bash scripts/harbor-e2e.sh [ROOT]     # ROOT: where the chroot lives (default /tmp/harbor-trixie)
#
# Every Harbor release requires Python >= 3.12 (docs/harnesses.md), which Debian 12 lacks, so
# this builds a Debian 13 (trixie, Python 3.13) chroot from Debian's mirror, installs Harbor
# 0.26.0 and this checkout there, and runs `harbor run` with Harbor's oracle agent (gold) and
# nop agent (null) on tests/harnesses/harbor_task/hello, on the local and docker backends
# (the host's Docker engine through its socket).  It expects rewards 1 and 0 and that no
# sandbox labelled harness=harbor is left.  Not part of CI: the chroot takes minutes to build.
# Needs root (debootstrap, unshare, chroot); the mounts live in a private mount namespace, so
# nothing stays mounted after it exits.  Idempotent: an existing chroot is reused.
set -euo pipefail
cd "$(dirname "$0")/.."
src="$(pwd)"
root="${1:-/tmp/harbor-trixie}"
image="${SANDBOX_RUNTIME_TEST_IMAGE:-sandbox-runtime-test/base:bookworm}"

if [ ! -x "$root/usr/bin/python3" ]; then
  mkdir -p "$root"
  debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,bubblewrap,ca-certificates \
    trixie "$root" http://deb.debian.org/debian
fi
# The host's name resolution and certificates (a proxy's CA, if any), and a plain pip config.
cp /etc/resolv.conf /etc/hosts "$root/etc/"
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$root/etc/pip.conf"
mkdir -p "$root/src" "$root/task"
touch "$root/run-docker.sock"
task="$(mktemp -d)"
cp -r tests/harnesses/harbor_task/hello "$task/"
sed -i "s|^docker_image = .*|docker_image = \"$image\"|" "$task/hello/task.toml"
printf 'FROM %s\n' "$image" >"$task/hello/environment/Dockerfile"

inside() {
  # The chroot's root must be a mount point for bubblewrap ("Failed to make / slave").
  unshare -m --propagation private bash -c '
    R=$1; mount --bind "$R" "$R"; mount -t proc proc "$R/proc"
    mount --rbind /dev "$R/dev"; mount --rbind /sys "$R/sys"
    mount --bind "$2" "$R/src"; mount --bind "$3" "$R/task"
    mount --bind /var/run/docker.sock "$R/run-docker.sock"
    exec chroot "$R" /usr/bin/env -i PATH=/opt/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      HOME=/root LANG=C.UTF-8 DOCKER_HOST=unix:///run-docker.sock \
      SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt LITELLM_LOCAL_MODEL_COST_MAP=True \
      bash -c "$4"' bash "$root" "$src" "$task" "$1"
}

inside '[ -x /opt/venv/bin/harbor ] || { python3 -m venv /opt/venv && pip install -q uv &&
  uv pip install -q --python /opt/venv/bin/python harbor==0.26.0; }
  uv pip install -q --python /opt/venv/bin/python --reinstall-package=sandbox-runtime-swe "/src[docker]"'
status=0
for run in "oracle local 1.0" "nop local 0.0" "oracle docker 1.0" "nop docker 0.0"; do
  set -- $run
  out="$(inside "cd /root && harbor run -q -y -p /task/hello -a $1 \
    -e sandbox_runtime.integrations.harbor:SandboxRuntimeEnvironment --ek backend=$2 \
    -o /root/jobs 2>&1" || true)"
  if grep -qE "^│ $3 +│ +1 │" <<<"$out"; then
    echo "ok: $1 on $2: reward $3"
  else
    echo "FAILED: $1 on $2 (expected reward $3)"; tail -30 <<<"$out"; status=1
  fi
done
left="$(inside 'python -c "from sandbox_runtime import list_sandboxes as ls
print(len(ls(\"local\", labels={\"harness\": \"harbor\"})) + len(ls(\"docker\", labels={\"harness\": \"harbor\"})))"')"
[ "$left" = 0 ] || { echo "FAILED: $left sandboxes left"; status=1; }
rm -rf "$task"
exit $status
