#!/usr/bin/env bash
# Build the Docker image the test suite runs on, without any registry: a minimal Debian
# rootfs from debootstrap (Debian's package mirror is reachable where registries are not),
# imported with `docker import`.  The rootfs tarball is cached, so later builds take seconds.
# Safe to run several times at once: builds are serialised by a lock, and the tarball is
# written under a unique name and renamed into place.
set -euo pipefail

image="${1:-sandbox-runtime-test/base:bookworm}"
cache="${SANDBOX_RUNTIME_IMAGE_CACHE:-$HOME/.cache/sandbox-runtime/images}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
tarball="$cache/base-bookworm.tar.gz"

if docker image inspect "$image" >/dev/null 2>&1; then
  echo "image $image already present"
  exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/.build.lock"
flock 9
# Another build may have finished while this one waited for the lock.
if docker image inspect "$image" >/dev/null 2>&1; then
  echo "image $image already present"
  exit 0
fi

if [ ! -s "$tarball" ]; then
  rootfs="$(mktemp -d)"
  trap 'rm -rf "$rootfs"' EXIT
  echo "debootstrap: building a minimal bookworm rootfs (about a minute)"
  debootstrap --variant=minbase \
    --include=python3,python3-pytest,git,patch,procps,ca-certificates \
    bookworm "$rootfs" "$mirror" >/dev/null
  # Trim what no test needs: package lists, docs, man pages, caches.
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin \
    "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/*
  partial="$(mktemp "$cache/base-bookworm.XXXXXX.partial")"
  tar -C "$rootfs" -czf "$partial" .
  mv "$partial" "$tarball"
fi

docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["/bin/bash"]' \
  "$tarball" "$image" >/dev/null
echo "built $image"
