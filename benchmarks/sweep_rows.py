"""Sweep of the softmax/log_softmax and norm kernels' variants on the GPU (issue 4's softmax and norm rows).

Cases: the benchmark's own (benchmarks/shapes.json through harness.expand_cases, the calls bench_ops.py times):
``softmax`` bfloat16 and float32 and ``log_softmax`` bfloat16 of 32768x8192 along dim -1 (the rows kernel's one
tile), both of 2048x151936 (the looped path), ``layer_norm`` and ``rms_norm`` bfloat16 and float32 of 32768x8192
(one tile per row), ``group_norm`` [64, 256, 128, 128] with 32 groups (rows of 131072: the looped, channel-wise
output path) and ``batch_norm`` (inference) of the same shape. Each candidate setting is laid over the config
rule the case reads (:func:`nbxtensor.runtime.configs.override`) and timed through the public op with CUDA events
and an L2 flush before every run (harness.run_benchmark / percentiles, bench_ops.py's clock). Variant ``table``
(the table as it is) runs first for every case. Every variant's first output is checked twice and a mismatch is
marked, never hidden: against the table variant's output on the device (the dtype's tolerance, NaN equal to NaN)
and against the op's float64 oracle on the first and last rows (samples for group_norm/batch_norm) on the host,
by the tolerance table widened by the row length as the tests do. Every exception is recorded per variant and the
sweep goes on. GB/s come from the op's cost declaration (bench_ops.py's bytes: the looped softmax and the
group_norm rows count two reads and a write), % of 4800 GB/s (H200 HBM3e).

Variants run rank by rank across cases (every case's table, then every case's first candidate, ...), each group's
candidates ordered most promising first, so a budget cut drops the least promising ones; the sweep stops starting
variants when the next one would pass ``--budget-s`` (default 100 s, compiles included).

Run on the H200 from the source tree::

    PYTHONPATH=src python3 benchmarks/sweep_rows.py --out $OUT/rows --budget-s 100

Smoke test on a host without a GPU (the interpreter runs the same variants on tiny shapes)::

    NBX_TRITON_INTERPRET=1 PYTHONPATH=src python3 benchmarks/sweep_rows.py --device cpu --smoke --out /tmp/rows

Writes ``DIR/sweep_rows.csv`` (one row per case and variant) and prints per case the table's setting and the best
variants, then per group the setting with the best geometric mean over its cases (for runtime/configs/sm90.json).

The new settings (default off; ops/softmax.py and ops/norm.py document them): softmax_rows ``EVEN`` (unmasked
one-tile rows where N == BLOCK_N), ``EXP_OUT`` (1: one ``ex2.approx.ftz`` per written element; 2: with log2(e)
folded into one FFMA, 16-bit outputs only), with the existing ``RCP`` (a reciprocal per row instead of an IEEE
division per element: sm_90 SASS of softmax bf16 8192 at 16 warps 632 -> 328 instructions per thread for 16
elements with all three); norm_rows ``EVEN``; batch_norm ``HW_CVT`` (hardware bf16 rounding), ``FMA`` (x * scale +
shift), ``EVEN``, ``LOOP_STAGES``, ``EVICT``. Session 6 (issue 4's rows below 85 %): softmax_rows ``CHUNK``
(looped pass 1 per chunk of consecutive elements) and ``EXP_OUT2`` (looped pass 2's exponential; 2 folds log2(e));
norm_rows ``CHUNK`` (looped statistics per chunk: group_norm) and the compile option ``maxnreg`` (register cap);
batch_norm ``SPLIT`` (one program per tile) and ``EVICT_OUT``. Session 7: norm_rows ``WARP_STATS`` (one-tile EVEN
rows: per-warp two-pass statistics, one cross-warp combination), ``PARAMS_ACC`` (persistent grid: weight and bias
converted once per program) and ``EVICT_W`` (the parameter loads' cache policy). Existing keys: ``num_warps``, ``programs_per_sm`` (persistent grid;
norms load weight and bias once per program), ``LOOP_STAGES`` (cp.async prefetch of the next row / tile),
``EVICT``/``EVICT2`` (L2 policies: a looped row's second read can hit L2).
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweep_common as SC  # noqa: E402  (puts src on the path)

import harness as H  # noqa: E402

TARGET_PCT = H.TARGET_PCT_BW
SHAPES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shapes.json")
OPS = ("softmax", "log_softmax", "layer_norm", "rms_norm", "group_norm", "batch_norm")

_FAST = {"RCP": True, "EVEN": True, "EXP_OUT": 2}  # softmax one tile: no division, no masks, one FFMA + one MUFU
# Candidate settings per group, most promising first (the table's own setting always runs first as "table").
VARIANTS = {
    "softmax_rows (one tile)": [   # table (8192 columns): BLOCK_M 1, BLOCK_N 8192, 16 warps, masked, IEEE division
        dict(_FAST, num_warps=8),                       # 32 elements a thread: 13.8 SASS instructions each
        dict(_FAST),                                    # 16 warps: 20.5 per element
        dict(_FAST, num_warps=4),                       # 64 a thread: 10.1 per element (82 registers)
        dict(_FAST, num_warps=8, programs_per_sm=2, LOOP_STAGES=2),  # persistent, next row prefetched (cp.async)
        dict(_FAST, EXP_OUT=1, num_warps=8),            # without the folded log2(e) (exact-shift exponent)
        {"RCP": True, "EVEN": True},
        {"RCP": True},
    ],
    "softmax_rows (looped)": [     # table: BLOCK_M 1, BLOCK_N 4096, 8 warps, LOOP_STAGES 3, one program per row
        # CHUNK 8 (pass 1 per 16-byte chunk: one max and one rescale per chunk, whole tiles unmasked) + EXP_OUT2 2
        # (folded log2(e) in both passes): sm_90 SASS per element pass 1 13.7 -> 8.9, pass 2 13.0 -> 8.9, 80 -> 40
        # registers (3 -> 6 programs of 8 warps per SM)
        {"CHUNK": 8, "EXP_OUT2": 2},
        {"CHUNK": 8, "EXP_OUT2": 2, "programs_per_sm": 1, "BLOCK_N": 8192, "num_warps": 16, "EVICT": "evict_last",
         "EVICT2": "evict_first"},                      # 132 rows in flight (39 MB): the second read from L2
        {"CHUNK": 8, "EXP_OUT2": 2, "LOOP_STAGES": 0},  # plain loads (no cp.async ring through shared memory)
        {"CHUNK": 8, "EXP_OUT2": 2, "num_warps": 4},
        {"CHUNK": 8},                                   # exact-shift exponentials (float32 results take this)
        {"programs_per_sm": 1, "BLOCK_N": 8192, "num_warps": 16, "LOOP_STAGES": 3, "EVICT": "evict_last",
         "EVICT2": "evict_first"},                      # 132 rows in flight (39 MB): the second read from L2
        {"programs_per_sm": 2, "LOOP_STAGES": 3, "EVICT": "evict_last", "EVICT2": "evict_first"},
        {"programs_per_sm": 1, "LOOP_STAGES": 4, "num_warps": 16},
    ],
    "norm_rows (one tile)": [      # table (bf16 8192 columns): BLOCK_M 1, BLOCK_N 8192, 8 warps, EVEN, maxnreg 64
        # WARP_STATS (session 7): per-warp two-pass statistics and one cross-warp Chan combination (shifted by the
        # row's first element), divisions by N as exact power-of-two scalings. sm_90 SASS of layer_norm bf16 8192
        # (instructions up to the EXIT, 32 elements a thread): 483 -> 468, BAR.SYNC 6 -> 3, spills 4 -> 0;
        # rms_norm 315 -> 304. Persistent + PARAMS_ACC (weight and bias converted to float32 once per program, kept
        # in registers: 127 registers, 2 programs of 8 warps per SM): 358 per row in the row loop.
        {"EVEN": True, "maxnreg": 64, "WARP_STATS": True},
        {"EVEN": True, "WARP_STATS": True, "programs_per_sm": 2, "maxnreg": 128, "PARAMS_ACC": True},
        {"EVEN": True, "maxnreg": 64, "WARP_STATS": True, "EVICT": "evict_first", "EVICT_W": "evict_last"},
        {"EVEN": True, "WARP_STATS": True, "programs_per_sm": 2, "LOOP_STAGES": 2, "maxnreg": 128,
         "PARAMS_ACC": True},                           # + the next row prefetched (cp.async): 395 per row
        {"EVEN": True, "WARP_STATS": True, "maxnreg": 80},  # 80 registers: 3 programs per SM
        {"EVEN": True, "WARP_STATS": True, "num_warps": 16, "programs_per_sm": 2, "maxnreg": 64,
         "PARAMS_ACC": True},                           # 2 programs of 16 warps: 273 per row, 16 elements a thread
        # register caps (sm_90 layer_norm bf16: 70 registers -> 3 programs of 8 warps per SM; 64 -> 4 (4 spill
        # instructions outside the row's data); 16 warps at 40 -> 3 of 16 (2 spills), at 52 (no cap) -> 2)
        {"EVEN": True, "maxnreg": 64},
        {"EVEN": True, "num_warps": 16, "maxnreg": 40},
        {"EVEN": True, "num_warps": 16},
        {"EVEN": True, "programs_per_sm": 2, "LOOP_STAGES": 2},  # params once per program, next row prefetched
        {"EVEN": True},
        {"EVEN": True, "programs_per_sm": 3, "LOOP_STAGES": 2},
        {"EVEN": True, "HOIST_PARAMS": True},
        {"EVEN": True, "programs_per_sm": 2, "LOOP_STAGES": 2, "EVICT": "evict_first"},
    ],
    "norm_rows (group)": [         # table (131072 columns): BLOCK_M 1, BLOCK_N 4096, 8 warps: two reads, 2048 rows
        # session 7 (table 81.3 %; the persistent L2-reuse variants below 64 %): SPLIT_STATS, two launches: the
        # statistics pass alone (STATS_OUT: a read-only stream, like sum's 92 %), then the batch_norm kernel's
        # output pass with statistics per (sample, group) (GSTATS; its rule: SPLIT tiles of 2048, 88 % for
        # batch_norm), with the statistics pass's tile around the table's
        {"CHUNK": 8, "SPLIT_STATS": True},
        {"CHUNK": 8, "SPLIT_STATS": True, "LOOP_STAGES": 3},
        {"CHUNK": 8, "SPLIT_STATS": True, "BLOCK_N": 8192, "num_warps": 16},
        {"CHUNK": 8, "SPLIT_STATS": True, "BLOCK_N": 2048, "num_warps": 4},
        {"CHUNK": 8, "SPLIT_STATS": True, "BLOCK_N": 2048, "num_warps": 4, "LOOP_STAGES": 3},
        # CHUNK 8: statistics per 16-byte chunk (two passes over registers, one Chan update per chunk and tile with
        # a per-tile scalar weight): sm_90 SASS of the statistics loop 20.3 -> 7.3 instructions per element, 9 -> 0
        # BAR.SYNC and 24 -> 0 SHFL per tile, 48 -> 61 registers (still 4 programs of 8 warps per SM)
        {"CHUNK": 8},
        {"CHUNK": 8, "LOOP_STAGES": 3},
        {"CHUNK": 8, "programs_per_sm": 1, "BLOCK_N": 8192, "num_warps": 16, "LOOP_STAGES": 3,
         "EVICT": "evict_last", "EVICT2": "evict_first"},   # 132 rows of 256 KB in flight: second read from L2?
        {"CHUNK": 8, "BLOCK_N": 8192, "num_warps": 16},
        # LANE_STATS: per-lane shifted Welford, no barrier in the statistics loop (SASS per 16-element step:
        # 342 -> 214 instructions, 9 -> 2 BAR.SYNC, 24 -> 0 SHFL); 132 rows of 256 KB in flight (33 MB < 50 MB
        # L2) with evict_last on the first read, so the second read can come from L2
        {"LANE_STATS": True, "programs_per_sm": 1, "BLOCK_N": 8192, "num_warps": 16, "LOOP_STAGES": 3,
         "EVICT": "evict_last", "EVICT2": "evict_first"},
        {"LANE_STATS": True, "LOOP_STAGES": 3},
        {"programs_per_sm": 1, "BLOCK_N": 8192, "num_warps": 16, "LOOP_STAGES": 3, "EVICT": "evict_last",
         "EVICT2": "evict_first"},
        {"LANE_STATS": True, "programs_per_sm": 2, "LOOP_STAGES": 3, "EVICT": "evict_last", "EVICT2": "evict_first"},
        {"LOOP_STAGES": 3},
    ],
    "batch_norm": [                # table: BLOCK_M 4, BLOCK_S 1024, 4 warps, HW_CVT, FMA, EVEN, LOOP_STAGES 3
        # SPLIT: one program per [BLOCK_M, BLOCK_S] tile (the pointwise kernels' schedule: no loop, no cp.async)
        {"SPLIT": True, "LOOP_STAGES": 0, "BLOCK_M": 1, "BLOCK_S": 2048},
        {"SPLIT": True, "LOOP_STAGES": 0, "BLOCK_M": 1, "BLOCK_S": 1024},
        {"SPLIT": True, "LOOP_STAGES": 0, "BLOCK_M": 1, "BLOCK_S": 4096, "num_warps": 8},
        {"SPLIT": True, "LOOP_STAGES": 0, "BLOCK_M": 1, "BLOCK_S": 2048, "EVICT_OUT": "evict_first"},
        {"HW_CVT": True, "FMA": True, "EVEN": True},    # 2.5 SASS instructions per element
        {"HW_CVT": True, "FMA": True, "EVEN": True, "LOOP_STAGES": 3},
        {"HW_CVT": True, "FMA": True, "EVEN": True, "BLOCK_M": 1, "BLOCK_S": 4096, "num_warps": 8},
        {"HW_CVT": True},
        {"HW_CVT": True, "FMA": True, "EVEN": True, "EVICT": "evict_first"},
    ],
}

# --smoke: shapes that take the same paths under the interpreter's tables (tiles of 16: BLOCK_N 16, BLOCK_S 8)
_SMOKE_SHAPES = {(32768, 8192): (8, 16), (2048, 151936): (2, 70), (64, 256, 128, 128): (2, 4, 4, 8)}


class Case:
    """One benchmarked call of the shapes file: ``name``, ``op``, the config ``rule`` its kernel reads, the
    ``group`` of :data:`VARIANTS`, the harness ``call`` (inputs as data), the launch-key ``facts`` and the row
    length ``reduced`` (the tolerance's widening)."""

    def __init__(self, name, op, rule, group, call, facts, reduced):
        self.name, self.op, self.rule, self.group, self.call = name, op, rule, group, call
        self.facts, self.reduced = facts, reduced


def _group_of(op: str, shape: tuple, groups: int) -> tuple[str, str, dict, int]:
    """(rule, group, launch-key facts, row length) of a benchmark case of ``shape``; one tile vs looped softmax
    as on the GPU's table (rows up to 16384)."""
    if op in ("softmax", "log_softmax"):
        rows, n = _prod(shape[:-1]), int(shape[-1])
        return "softmax_rows", f"softmax_rows ({'one tile' if n <= 16384 else 'looped'})", dict(rows=rows, cols=n), n
    if op in ("layer_norm", "rms_norm"):
        rows, n = _prod(shape[:-1]), int(shape[-1])
        return "norm_rows", "norm_rows (one tile)", dict(rows=rows, cols=n), n
    if op == "group_norm":
        n = _prod(shape[1:]) // groups
        return "norm_rows", "norm_rows (group)", dict(rows=shape[0] * groups, cols=n), n
    spatial = _prod(shape[2:])
    return "batch_norm", "batch_norm", dict(rows=_prod(shape) // spatial, cols=spatial), 1


def _prod(xs) -> int:
    p = 1
    for v in xs:
        p *= int(v)
    return p


def build_cases(smoke: bool) -> list[Case]:
    """The shapes file's cases of :data:`OPS`; for ``smoke`` the same calls on tiny shapes that take the same
    paths under the interpreter (the group is the full shape's)."""
    doc = H.load_shapes(SHAPES)
    out = []
    for op in OPS:
        for case, shape, dt, call in H.expand_cases(doc, op):
            groups = int(case.get("groups", 32))
            rule, group, facts, reduced = _group_of(op, tuple(shape), groups)
            if smoke:
                tiny = _SMOKE_SHAPES.get(tuple(shape))
                if tiny is None:
                    continue
                entry = dict(case, groups=2) if op == "group_norm" else case
                call = H.FACTORIES[case["factory"]](op, tiny, dt, entry)
                shape, groups = tiny, int(entry.get("groups", 32))
                _, _, facts, reduced = _group_of(op, tuple(shape), groups)
            label = case.get("label")
            name = f"{op} {dt} {'x'.join(map(str, shape))}" + (f" {label}" if label else "")
            out.append(Case(name, op, rule, group, call, facts, reduced))
    return out


def smoke_settings(settings: dict) -> dict:
    """A variant for the interpreter: tiles capped at 16 (the interpreter's tables: rows of 16 stay one tile,
    so EVEN is exercised)."""
    return {k: (min(v, 16) if k.startswith("BLOCK_") else v) for k, v in settings.items()}


def check_same(nbx, got, ref) -> str:
    """'ok' when ``got`` matches the table's output ``ref`` on the device (the dtype's tolerance, NaN == NaN)."""
    from nbxtensor.dtypes import tolerance
    if tuple(got.shape) != tuple(ref.shape) or got.dtype is not ref.dtype:
        return f"mismatch: {got.dtype.name}{list(got.shape)} vs table {ref.dtype.name}{list(ref.shape)}"
    tol = tolerance(got.dtype)
    ok = nbx.isclose(got.float(), ref.float(), rtol=tol.rtol, atol=tol.atol, equal_nan=True).all().item()
    return "ok" if ok else "mismatch vs table"


def _edge_slices(n0: int, k: int) -> list[slice]:
    return [slice(0, n0)] if n0 <= 2 * k else [slice(0, k), slice(n0 - k, n0)]


def check_oracle(nbx, case: Case, tensors: list, res, k: int = 8) -> str:
    """'ok' when the first and last ``k`` entries along dim 0 of ``res`` match the op's float64 oracle on the same
    entries of the input (rows are independent for these ops; parameters whole), by the tolerance table widened
    by the row length; else a short reason."""
    import numpy as np

    from nbxtensor.dtypes import table as T, tolerance
    from nbxtensor.dtypes.casting import cast_array
    from nbxtensor.ops import registry
    rec = registry.get(case.op)
    k = 1 if case.op in ("group_norm", "batch_norm") else k
    parts_x, parts_y = [], []
    for sl in _edge_slices(tensors[0].shape[0], k):
        parts_x.append(tensors[0][sl].to("cpu").numpy())
        parts_y.append(res[sl].to("cpu").numpy())
    hx = np.concatenate(parts_x)
    got = cast_array(np.concatenate(parts_y), res.dtype, T.float64)
    host = [hx] + [t.to("cpu").numpy() for t in tensors[1:]]
    args = H.materialize(list(case.call.args), host, lambda n: n)
    kwargs = H.materialize(dict(case.call.kwargs), host, lambda n: n)
    exp = cast_array(cast_array(np.asarray(rec.oracle(*args, **kwargs), dtype=np.float64), T.float64, res.dtype),
                     res.dtype, T.float64)
    tol = tolerance(res.dtype, reduced=max(case.reduced, 1))
    with np.errstate(all="ignore"):
        ok = (np.isnan(got) == np.isnan(exp)) & np.where(np.isnan(exp), True, np.abs(got - exp) <= tol.atol +
                                                         tol.rtol * np.abs(exp))
    return "ok" if ok.all() else f"mismatch vs oracle ({int((~ok).sum())} of {ok.size})"


CSV_FIELDS = ["case", "op", "rule", "group", "variant", "settings", "table_config", "status", "p20_ms", "p50_ms",
              "p80_ms", "gbps", "pct_of_4800", "bytes", "first_call_s", "gpu", "commit", "date"]


def main(argv=None) -> int:
    p = SC.sweep_parser(__doc__, "output folder (sweep_rows.csv is written there)", budget_s=100.0,
                        wording="variants")
    p.add_argument("--cases", default="", help="comma-separated substrings of case names (default: all)")
    p.add_argument("--groups", default="", help="comma-separated variant groups (default: all)")
    a = p.parse_args(argv)
    t0 = time.monotonic()
    import nbxtensor as nbx
    import nbxtensor.nn.functional  # noqa: F401  (functional ops register on import)
    from bench_ops import declared_cost
    from nbxtensor.ops import registry
    from nbxtensor.runtime.configs import launch_config
    dev = a.device
    st = SC.start("sweep_rows", nbx, dev, a.out, a.smoke)
    if st is None:
        return 2
    facts, timing, notes, clock, commit, date = st.facts, st.timing, st.notes, st.clock, st.commit, st.date
    cases = build_cases(a.smoke)
    if a.cases:
        cases = [c for c in cases if any(w in c.name for w in SC.names(a.cases))]
    if a.groups:
        cases = [c for c in cases if c.group in set(SC.names(a.groups))]
    inputs = SC.Inputs(nbx, dev)
    state = {c.name: {"ref": None, "bytes": None, "table": None} for c in cases}
    csv_path = os.path.join(a.out, "sweep_rows.csv")
    writer = SC.CsvRows(csv_path, CSV_FIELDS)
    plan = SC.rank_plan(cases, lambda c: VARIANTS[c.group])
    print(f"sweep_rows: {len(plan)} variants over {len(cases)} cases on {facts['gpu']} (commit {commit}); "
          f"budget {a.budget_s:.0f} s", flush=True)

    def make_row(rank, case, settings):
        return {"case": case.name, "op": case.op, "rule": case.rule, "group": case.group,
                "variant": "table" if not settings else f"v{rank}", "settings": SC.fmt_settings(settings),
                "gpu": facts["gpu"], "commit": commit, "date": date}

    def run_variant(row, case, settings, t_var):
        cs = state[case.name]
        ts = inputs.tensors(case.call.inputs)
        fn = H.resolve_call(nbx, case.call, ts)
        if cs["bytes"] is None:
            args = H.materialize(list(case.call.args), ts, lambda n: getattr(nbx, n))
            kwargs = H.materialize(dict(case.call.kwargs), ts, lambda n: getattr(nbx, n))
            _, cs["bytes"], _ = declared_cost(registry.get(case.op), case.call, ts, args, kwargs, None)
            cs["table"] = launch_config(case.rule, ts[0].device, dtypes=(ts[0].dtype,), **case.facts)
        row["table_config"] = SC.fmt_settings(cs["table"])
        row["bytes"] = cs["bytes"]

        def check(res):
            verdict = check_oracle(nbx, case, ts, res)
            if not settings:
                cs["ref"] = res
                return "ok (reference)" if verdict == "ok" else f"{verdict} (table)"
            if cs["ref"] is None:
                return verdict if verdict != "ok" else "ok (oracle only: the table failed)"
            same = check_same(nbx, res, cs["ref"])
            return verdict if verdict != "ok" else same
        times = SC.check_then_time(row, case.rule, smoke_settings(settings) if a.smoke else settings, fn, check,
                                   clock, timing, t_var)
        row.update(SC.bandwidth_fields(times, cs["bytes"]))
    rows, skipped = SC.run_plan(plan, budget_s=a.budget_s, t0=t0, est=0.5 if a.smoke else 3.0, make_row=make_row,
                                run_variant=run_variant, writer=writer,
                                log_path=os.path.join(a.out, "sweep_rows.log"))
    for c in cases:  # free the references before printing
        state[c.name]["ref"] = None
    report(rows, cases, state, skipped, time.monotonic() - t0, a.budget_s, csv_path, notes)
    return 0


def report(rows, cases, state, skipped, wall, budget, csv_path, notes) -> None:
    """Per case the table and the best (up to 3) checked variants, then the best per case and per group (geometric
    mean of GB/s over the group's cases, settings that ran and matched on all of them)."""
    SC.report_rank_sweep("sweep_rows", rows, cases, state, skipped, wall, budget, csv_path, notes,
                         target_pct=TARGET_PCT, group_field="group", case_width=38, group_width=24,
                         heading="per group, best geometric mean over its cases (write into runtime/configs/sm90.json, "
                                 "per dtype if the cases disagree):",
                         missing="{group}: no setting ran on all of its {n} cases", rule_config=False,
                         is_mismatch=lambda status: "mismatch" in status)


if __name__ == "__main__":
    sys.exit(main())
