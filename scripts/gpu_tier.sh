#!/usr/bin/env bash
# GPU tier: the test suite with the cuda device selected (NBX_TEST_DEVICE=cuda), then the runtime benchmarks, all
# from the source tree (PYTHONPATH=src; no installation, no network). Writes into OUT_DIR:
#   info.txt             `nbx info` (versions, devices with their facts, torch not imported)
#   junit.xml, pytest.log the test run
#   runtime.csv, runtime_summary.md, bench_runtime.log   benchmarks/bench_runtime.py
#   bench/               benchmarks/bench_ops.py: results.csv, summary.md, roofline.png (NBX_GPU_TIER_OPS=0 skips it;
#                        NBX_GPU_TIER_OPS_BUDGET_S caps its time, NBX_GPU_TIER_OPS_FILTER selects ops)
#   summary.md           pass/fail counts, failures, the benchmark table
# Exits non-zero when there is no CUDA device, a test fails, or a benchmark fails to run.
#
# Usage: bash scripts/gpu_tier.sh OUT_DIR [pytest paths or options...]   (default: tests, parity suite excluded)
# Environment: PYTHON (default python3); NBX_GPU_TIER_QUICK=1 runs the benchmarks with --quick; NBX_COMMIT names the
# commit in the reports when the tree has no .git.
set -uo pipefail
if [ $# -lt 1 ]; then
  echo "usage: bash scripts/gpu_tier.sh OUT_DIR [pytest paths or options...]" >&2
  exit 2
fi
OUT=$1
shift
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export NBX_TEST_DEVICE=cuda
unset NBX_TRITON_INTERPRET TRITON_INTERPRET

echo "== nbx info =="
"$PY" -m nbxtensor.cli info 2>&1 | tee "$OUT/info.txt"
if ! "$PY" -c "import sys, nbxtensor as nbx; sys.exit(0 if nbx.cuda.is_available() else 3)"; then
  echo "gpu_tier: no CUDA device here (see $OUT/info.txt)" | tee "$OUT/summary.md" >&2
  exit 3
fi

echo "== tests (NBX_TEST_DEVICE=cuda) =="
if [ $# -gt 0 ]; then TESTS=("$@"); else TESTS=(-m "not parity" tests); fi
"$PY" -m pytest -p no:cacheprovider -q -rfE --junitxml="$OUT/junit.xml" "${TESTS[@]}" 2>&1 | tee "$OUT/pytest.log"
RC_TESTS=${PIPESTATUS[0]}

echo "== runtime benchmarks =="
BENCH_ARGS=(--out "$OUT")
if [ "${NBX_GPU_TIER_QUICK:-0}" = "1" ]; then BENCH_ARGS+=(--quick); fi
"$PY" benchmarks/bench_runtime.py "${BENCH_ARGS[@]}" 2>&1 | tee "$OUT/bench_runtime.log"
RC_BENCH=${PIPESTATUS[0]}

if [ "${NBX_GPU_TIER_OPS:-1}" = "1" ]; then
  echo "== operator benchmarks (ours vs PyTorch eager in a separate process) =="
  OPS_ARGS=(--out "$OUT/bench" --budget-s "${NBX_GPU_TIER_OPS_BUDGET_S:-300}")
  if [ "${NBX_GPU_TIER_QUICK:-0}" = "1" ]; then OPS_ARGS+=(--quick); fi
  if [ -n "${NBX_GPU_TIER_OPS_FILTER:-}" ]; then OPS_ARGS+=(--ops "$NBX_GPU_TIER_OPS_FILTER"); fi
  "$PY" benchmarks/bench_ops.py "${OPS_ARGS[@]}" > "$OUT/bench_ops.log" 2>&1
  RC_OPS=$?
  tail -n 40 "$OUT/bench_ops.log"
  if [ $RC_OPS -ne 0 ]; then RC_BENCH=$RC_OPS; fi
fi

"$PY" - "$OUT" "$RC_TESTS" "$RC_BENCH" <<'EOF'
import os, subprocess, sys, xml.etree.ElementTree as ET
out, rc_tests, rc_bench = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
lines = ["# GPU tier", ""]
commit = os.environ.get("NBX_COMMIT", "")
if not commit:
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip() or "unknown"
    except Exception:
        commit = "unknown"
info = open(os.path.join(out, "info.txt")).read().strip() if os.path.exists(os.path.join(out, "info.txt")) else ""
lines += [f"Commit {commit}. Command: `bash scripts/gpu_tier.sh {out}`", "", "```", info, "```", ""]
counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
failed = []
try:
    root = ET.parse(os.path.join(out, "junit.xml")).getroot()
    for suite in ([root] if root.tag == "testsuite" else root.findall("testsuite")):
        for k in counts:
            counts[k] += int(suite.get(k, 0))
        for case in suite.iter("testcase"):
            for bad in ("failure", "error"):
                el = case.find(bad)
                if el is not None:
                    msg = (el.get("message") or "").splitlines()[0][:200] if el.get("message") else ""
                    failed.append(f"- {bad}: `{case.get('classname')}::{case.get('name')}` {msg}")
except (OSError, ET.ParseError) as e:
    lines.append(f"(no JUnit XML: {e})")
passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
lines += [f"Tests: {passed} passed, {counts['failures']} failed, {counts['errors']} errors, "
          f"{counts['skipped']} skipped (exit status {rc_tests}).", ""]
if failed:
    lines += ["Failures:", ""] + failed + [""]
bench = os.path.join(out, "runtime_summary.md")
lines += ["## Runtime benchmarks", "", open(bench).read() if os.path.exists(bench) else "(none)",
          f"Benchmark exit status {rc_bench}.", ""]
ops = os.path.join(out, "bench", "summary.md")
if os.path.exists(ops):
    lines += ["## Operator benchmarks", "", open(ops).read(), ""]
ok = rc_tests == 0 and rc_bench == 0
lines.append(f"**GPU tier: {'PASS' if ok else 'FAIL'}**")
open(os.path.join(out, "summary.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines[-3:]))
EOF

if [ "$RC_TESTS" -ne 0 ] || [ "$RC_BENCH" -ne 0 ]; then
  exit 1
fi
exit 0
