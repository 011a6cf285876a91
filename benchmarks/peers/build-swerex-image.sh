#!/usr/bin/env bash
# Build the image SWE-ReX's DockerDeployment runs in for benchmarks/bench_peers.py: the test
# image (sandbox-runtime-test/base:bookworm) plus swe-rex's server, `swerex-remote`, on PATH.
#
# SWE-ReX starts `swerex-remote` inside the container and falls back to `pip install pipx`
# there, which needs a registry; none is reachable from the sandboxes here, and the test image
# has python3 but neither pip nor ensurepip.  So the wheels are downloaded on the host with
# `pip download` for the image's interpreter (CPython 3.11, x86_64, glibc 2.36) and installed
# in the image with `--no-index`, by pip run straight from its own wheel (pip supports
# `python pip.whl/pip ...` for bootstrapping) into a venv made `--without-pip`, so swe-rex's
# dependencies stay out of the system python that the benchmark's commands use.
#
# Idempotent: an existing image is kept (pass --force to rebuild); the wheels are cached.
# Usage: benchmarks/peers/build-swerex-image.sh [--force]
# Environment: SWEREX_IMAGE (default sandbox-runtime-bench/swerex:1.4.0), BASE_IMAGE,
# SWEREX_VERSION (1.4.0), PYTHON (a host python3 with pip, used only to download).
set -euo pipefail

base="${BASE_IMAGE:-sandbox-runtime-test/base:bookworm}"
version="${SWEREX_VERSION:-1.4.0}"
image="${SWEREX_IMAGE:-sandbox-runtime-bench/swerex:$version}"
python="${PYTHON:-python3}"
cache="${SANDBOX_RUNTIME_IMAGE_CACHE:-$HOME/.cache/sandbox-runtime/images}/swerex-$version-wheels"

if [ "${1:-}" != "--force" ] && docker image inspect "$image" >/dev/null 2>&1; then
  echo "image $image already present"
  exit 0
fi
docker image inspect "$base" >/dev/null 2>&1 || {
  echo "base image $base is missing: build it with tests/images/build-base-image.sh" >&2
  exit 1
}

# The image's interpreter decides which wheels fit.
py_version="$(docker run --rm "$base" python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
mkdir -p "$cache"
platforms=()
for tag in manylinux_2_36 manylinux_2_34 manylinux_2_28 manylinux_2_17 manylinux2014 manylinux_2_5 manylinux1; do
  platforms+=(--platform "${tag}_x86_64")
done
# aiohttp: swe-rex's client imports it without declaring it; the server does not need it, but
# the same wheel set then serves a client inside the image too.
"$python" -m pip download --quiet --dest "$cache" --only-binary=:all: \
  --python-version "$py_version" --implementation cp "${platforms[@]}" \
  "swe-rex==$version" aiohttp pip

context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
cp "$cache"/*.whl "$context/"
cat >"$context/Dockerfile" <<DOCKERFILE
FROM $base
COPY *.whl /tmp/wheels/
RUN python3 -m venv --without-pip /opt/swerex \\
 && pip_wheel="\$(ls /tmp/wheels/pip-*.whl)" \\
 && /opt/swerex/bin/python "\$pip_wheel/pip" install --quiet --no-index --find-links /tmp/wheels \\
      "swe-rex==$version" aiohttp \\
 && ln -s /opt/swerex/bin/swerex-remote /usr/local/bin/swerex-remote \\
 && rm -rf /tmp/wheels \\
 && swerex-remote --help >/dev/null
DOCKERFILE
# The classic builder uses the local base image as it is (no registry lookup for FROM).
DOCKER_BUILDKIT=0 docker build --quiet --tag "$image" "$context" >/dev/null
echo "built $image"
