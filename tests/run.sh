#!/usr/bin/env bash
# Install everything the tests need on a fresh machine, then run them (the README's test command).
#   tests/run.sh               every layer (four workers on two cores: many tests wait on processes and brokers; each
#                              test module on one worker)
#   tests/run.sh unit          one layer alone: unit (the edit-test loop), process, broker, stack or install
#   tests/run.sh unit -k foo   anything after the layer (or instead of it) goes to pytest as it is
# Layers: tests/support/layers.py. Every run prints its 25 slowest tests. TEST_WORKERS sets the workers (0: none).
# Exit status: pytest's, except that "no tests collected" (5) counts as a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
LAYER=()
case "${1:-}" in
  unit | process | broker | stack | install) LAYER=(-m "$1"); shift ;;
esac

# What needs nothing of the project installs beside it, each in the background (waited for before pytest):
# Azurite, Microsoft's Azure Blob emulator (the object store tests), from the npm registry into .cache/azurite;
# checkov (the chart's Kubernetes checks: tests/test_chart_checks.py), which pins many packages of its own: its own
# virtualenv, made once, the version pinned so that a new release's checks do not move the docs' skip list;
# promtool and the Prometheus server (rule tests, scrape-and-alert tests) from Debian's prometheus package,
# headless Chromium (the monitor's live page in a browser) from Debian's chromium package, and kcat, an outside
# client of the local broker (docs/tap.md)
background=()
# (a step that fails before the wait leaves no install running behind it)
trap 'for pid in ${background[@]+"${background[@]}"}; do kill "$pid" 2>/dev/null || true; done' EXIT
if ! [ -x .cache/azurite/node_modules/.bin/azurite-blob ] && command -v npm >/dev/null 2>&1; then
  (mkdir -p .cache/azurite && npm install --silent --no-audit --no-fund --prefix .cache/azurite azurite@3 >/dev/null) &
  background+=($!)
fi
if [ ! -x .cache/checkov/bin/checkov ]; then
  ("$PY" -m venv .cache/checkov && .cache/checkov/bin/pip install -q --disable-pip-version-check 'checkov==3.3.30') &
  background+=($!)
fi
missing=()
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (export DEBIAN_FRONTEND=noninteractive && apt-get update -qq >/dev/null &&
      apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null) &
    background+=($!)
  else
    echo "not found: Debian's ${missing[*]} package(s) (tests that need them fail when CI=true)" >&2
  fi
fi

# torch (extra `train`: the test models, the NPR reference) is large: asked for only when it is missing, in the same
# install (one resolution)
extras=test,triton-local
"$PY" -c 'import torch' >/dev/null 2>&1 || extras=$extras,train
# (--no-compile: bytecode is written as modules are first imported, not for every package up front)
"$PY" -m pip install -q --disable-pip-version-check --no-compile -e ".[$extras]"
# the Triton server that the nvidia-pytriton wheel bundles (its numpy<2 pin would break pyarrow: no deps)
if ! "$PY" -m pip show -q nvidia-pytriton >/dev/null 2>&1; then
  "$PY" -m pip install -q --disable-pip-version-check --no-deps 'nvidia-pytriton==0.7.0'
fi

"$PY" -m ruff check .
"$PY" -m ruff format --check .
# layering: transforms <- detectors <- gateway, no cycles inside a package (contracts in pyproject.toml)
"$PY" -c 'from importlinter.cli import lint_imports_command; lint_imports_command()' --no-cache --no-logo
for pid in ${background[@]+"${background[@]}"}; do
  wait "$pid" || { echo "an install in the background failed (exit $?): see above" >&2; exit 1; }
done

set +e
"$PY" -m pytest -q -p no:cacheprovider -n "${TEST_WORKERS:-4}" --dist loadgroup --durations=25 ${LAYER[@]+"${LAYER[@]}"} "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$status"
