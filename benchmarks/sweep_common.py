"""What the GPU sweeps (benchmarks/sweep_*.py) share: the import path, the common command-line options, the set-up
(device check, output folder, device facts, timing settings, the event clock with its L2 flush (``--flush``), run
id, commit and date), the budget, the timing of a variant (host cost, a single timed run for the interpreter, first
call then timed runs), error records, and for the rank-by-rank sweeps the plan, its run under the budget, the CSV,
the per-rule geometric mean and the printed report.

Each sweep keeps only what is specific to its area: shapes, variants, inputs, output checks and its printed table
(or the settings of the shared report).
Importing this module puts the source tree's ``src`` on ``sys.path`` (before any ``nbxtensor`` import), so the
sweeps run from a checkout without installing the library.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import os
import sys
import time
import traceback
import warnings
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
if os.path.isdir(os.path.join(REPO, "src", "nbxtensor")) and os.path.join(REPO, "src") not in sys.path:
    sys.path.insert(0, os.path.join(REPO, "src"))

import harness as H  # noqa: E402

PEAK_GBPS = 4800.0  # H200 datasheet HBM3e

# The wording of the common options: "work" for the sweeps that check the budget before each (variant, shape) pair
# and append to their CSV, "variants" for the rank-by-rank sweeps that check it before each variant.
_HELP = {
    "work": dict(budget="stop starting work after this many seconds, compiles included (default {budget:.0f})",
                 device="cuda, cuda:N, or cpu (with NBX_TRITON_INTERPRET=1: a smoke run)",
                 smoke="tiny shapes and minimal timing (host smoke test)"),
    "variants": dict(budget="stop starting variants when the next one would pass this many seconds, compiles "
                            "included (0: no limit)",
                     device="cuda, cuda:N, or cpu (the interpreter; with --smoke)",
                     smoke="tiny shapes, short timing (host smoke test)"),
}


_parsed_flush: list = []   # the --flush of the last parse of a sweep_parser (start()'s default flush mode)


class _SweepParser(argparse.ArgumentParser):
    """An ArgumentParser that remembers the ``--flush`` it parsed, so :func:`start` uses it without every sweep
    passing it on."""

    def parse_known_args(self, args=None, namespace=None):
        ns, rest = super().parse_known_args(args, namespace)
        if getattr(ns, "flush", None) is not None:
            _parsed_flush[:] = [ns.flush]
        return ns, rest


def sweep_parser(doc: str, out_help: str, *, out_default: str | None = None, budget_s: float = 120.0,
                 wording: str = "work", smoke_help: str | None = None) -> argparse.ArgumentParser:
    """An argument parser described by the first paragraph of ``doc`` (the sweep's module docstring) with the
    options every sweep has, in this order: ``--out`` (required unless ``out_default`` is given; help
    ``out_help``), ``--budget-s`` (seconds, default ``budget_s``), ``--device`` (default ``cuda``), ``--smoke``
    and ``--flush`` (``clean``, the default, or ``write``: harness.py, "Timing"; :func:`start` takes the parsed
    value).

    ``wording`` picks the help texts (see ``_HELP``: ``"work"`` or ``"variants"``); ``smoke_help`` replaces the
    one of ``--smoke``. The caller adds its own options after these.
    """
    helps = _HELP[wording]
    p = _SweepParser(description=doc.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    if out_default is None:
        p.add_argument("--out", required=True, help=out_help)
    else:
        p.add_argument("--out", default=out_default, help=out_help)
    p.add_argument("--budget-s", type=float, default=budget_s, help=helps["budget"].format(budget=budget_s))
    p.add_argument("--device", default="cuda", help=helps["device"])
    p.add_argument("--smoke", action="store_true", help=smoke_help or helps["smoke"])
    p.add_argument("--flush", choices=H.FLUSH_MODES, default="clean", help="L2 flush before each timed run: clean "
                   "(write a buffer, then read another, so the flush's dirty lines reach HBM before the start "
                   "event; default) or write (the write alone, as Triton's do_bench)")
    return p


def names(text: str) -> list[str]:
    """The non-empty, stripped items of a comma-separated option value (``--variants a, b`` -> ``["a", "b"]``)."""
    return [s.strip() for s in text.split(",") if s.strip()]


def start(name: str, nbx, dev: str, out: str, smoke: bool, *, warmup_ms: float = 10.0, rep_ms: float = 40.0,
          min_reps: int = 5, max_reps: int = 40, smoke_rep_ms: float = 1.0, smoke_max_reps: int = 2,
          utc: bool = False, hint: str = "use --device cpu --smoke with NBX_TRITON_INTERPRET=1",
          flush_mode: str | None = None):
    """Prepare a sweep named ``name`` on ``dev`` writing into ``out``.

    The timing is ``warmup_ms``/``rep_ms``/``min_reps``/``max_reps`` with an L2 flush of at least 4x the card's L2;
    for ``smoke`` or the CPU no warm-up, ``smoke_rep_ms`` of repetitions, one to ``smoke_max_reps`` runs and a
    1 MiB flush. The flush mode is ``flush_mode``, else the ``--flush`` a :func:`sweep_parser` parsed last, else
    ``"clean"`` (bench_ops.make_clock; harness.py, "Timing"); ``notes`` starts with a line naming it. ``date`` is
    local time (``2025-01-31T12:00:00``), or UTC with a ``Z`` when ``utc``.

    Returns:
        ``None`` (after saying why on stderr, with ``hint``) when ``dev`` is a CUDA device and none is available;
        else a namespace with ``facts`` (bench_ops.device_facts), ``timing`` (a harness.TimingConfig), ``notes``
        (a list the clock appends to), ``clock``, ``run_id`` (UTC, ``20250131T120000Z``), ``commit`` and ``date``.
    """
    from bench_ops import device_facts, git_commit, make_clock
    if dev.startswith("cuda") and not (hasattr(nbx, "cuda") and nbx.cuda.is_available()):
        print(f"{name}: no CUDA device is available ({hint})", file=sys.stderr)
        return None
    os.makedirs(out, exist_ok=True)
    facts = device_facts(nbx, dev)
    mode = flush_mode or (_parsed_flush[0] if _parsed_flush else "clean")
    timing = H.TimingConfig(warmup_ms=warmup_ms, rep_ms=rep_ms, min_reps=min_reps, max_reps=max_reps,
                            flush_mode=mode)
    if smoke or dev == "cpu":
        timing = H.TimingConfig(warmup_ms=0.0, rep_ms=smoke_rep_ms, min_reps=1, max_reps=smoke_max_reps,
                                flush_bytes=1 << 20, flush_mode=mode)
    elif facts.get("l2"):
        timing.flush_bytes = max(timing.flush_bytes, 4 * facts["l2"])
    notes: list[str] = [f"L2 flush {H.describe_flush(timing)}"]
    clock = make_clock(nbx, dev, timing.flush_bytes, notes, timing.flush_mode)
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    commit = git_commit()
    date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) if utc else time.strftime("%Y-%m-%dT%H:%M:%S")
    return SimpleNamespace(facts=facts, timing=timing, notes=notes, clock=clock, run_id=run_id, commit=commit,
                           date=date)


# ---------------------------------------------------------------------------------------------------------------
# Budget
# ---------------------------------------------------------------------------------------------------------------
class Budget:
    """The time a sweep may spend: ``seconds`` from ``t0`` (now by default; ``seconds <= 0``: no limit), and the
    last measured cost of each kind of work (a key such as a shape label) as the estimate of its next run."""

    def __init__(self, seconds: float, t0: float | None = None):
        self.t0 = time.monotonic() if t0 is None else t0
        self.deadline = self.t0 + seconds if seconds > 0 else math.inf
        self._cost: dict = {}

    def until(self, share: float = 1.0) -> float:
        """The monotonic time by which ``share`` of the budget is spent (``inf`` without a limit)."""
        return self.t0 + share * (self.deadline - self.t0) if math.isfinite(self.deadline) else self.deadline

    def elapsed(self) -> float:
        """Seconds since ``t0``."""
        return time.monotonic() - self.t0

    def allows(self, key, until: float | None = None) -> bool:
        """Whether work of kind ``key`` (at its last measured cost, 0 the first time) ends by ``until`` (default:
        the deadline)."""
        return not time.monotonic() + self._cost.get(key, 0.0) > (self.deadline if until is None else until)

    def record(self, key, started: float) -> None:
        """Remember the cost of work of kind ``key`` that began at the monotonic time ``started``."""
        self._cost[key] = time.monotonic() - started


# ---------------------------------------------------------------------------------------------------------------
# Running and timing a variant
# ---------------------------------------------------------------------------------------------------------------
def laid_over(rule: str, settings: dict):
    """A context in which ``settings`` lie over the config table's ``rule``
    (:func:`nbxtensor.runtime.configs.override`); the table as it is for the table variant (``{}``)."""
    if not settings:
        return contextlib.nullcontext()
    from nbxtensor.runtime.configs import override
    return override(rule, **settings)


def host_cost_us(nbx, fn, dev: str, n: int) -> float:
    """Wall time per call (us) of ``n`` back-to-back calls that do not wait for the device (launch overhead),
    after one call and a synchronisation."""
    fn()
    if dev != "cpu":
        nbx.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    if dev != "cpu":
        nbx.cuda.synchronize()
    return (t1 - t0) / n * 1e6


def make_bench(clock, timing, one_shot: bool):
    """``bench(fn) -> times (ms)``: harness.run_benchmark with ``timing``, or for ``one_shot`` (the interpreter,
    about a second per call) one warm-up call and a single flushed, event-timed run."""
    if not one_shot:
        return lambda fn: H.run_benchmark(fn, clock, timing)

    def bench(fn):
        fn()
        s_, e_ = clock.event(), clock.event()
        clock.flush()
        s_.record()
        fn()
        e_.record()
        clock.synchronize()
        return [float(s_.elapsed_time(e_))]
    return bench


def bandwidth(times: list, nbytes: int) -> tuple[float, float, float, float, float]:
    """``(p20, p50, p80)`` of ``times`` (ms), the GB/s of ``nbytes`` moved in the median time and its % of
    :data:`PEAK_GBPS`."""
    p20, p50, p80 = H.percentiles(times)
    gbps = nbytes / (p50 * 1e-3) / 1e9
    return p20, p50, p80, gbps, 100.0 * gbps / PEAK_GBPS


def check_then_time(row: dict, rule: str, settings: dict, fn, check, clock, timing, started: float) -> list:
    """One variant of a rank-by-rank sweep: with ``settings`` laid over ``rule`` and warnings silenced, call
    ``fn`` once (compiling), wait, set ``row["first_call_s"]`` (seconds since ``started``) and ``row["status"] =
    check(result)``, drop the result, then time ``fn`` (harness.run_benchmark). Returns the times (ms)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with laid_over(rule, settings):
            res = fn()
            clock.synchronize()
            row["first_call_s"] = round(time.monotonic() - started, 2)
            row["status"] = check(res)
            del res
            return H.run_benchmark(fn, clock, timing)


def bandwidth_fields(times: list, nbytes: int) -> dict:
    """The CSV fields of the rank-by-rank sweeps for ``times`` (ms) of a call moving ``nbytes``: ``p20_ms``,
    ``p50_ms``, ``p80_ms`` (4 decimals), ``gbps`` (3) and ``pct_of_4800`` (2)."""
    p20, p50, p80, gbps, pct = bandwidth(times, nbytes)
    return dict(p20_ms=round(p20, 4), p50_ms=round(p50, 4), p80_ms=round(p80, 4), gbps=round(gbps, 3),
                pct_of_4800=round(pct, 2))


def error_text(e: BaseException, limit: int = 300, message_limit: int | None = None) -> str:
    """``"<type>: <first line of the message>"`` cut to ``limit`` characters (or, with ``message_limit``, the
    first line cut to that many characters and the whole not cut)."""
    msg = str(e).splitlines()[0] if str(e) else ""
    if message_limit is not None:
        return f"{type(e).__name__}: {msg[:message_limit]}"
    return f"{type(e).__name__}: {msg}"[:limit]


def log_traceback(path: str, header: str) -> None:
    """Append ``--- header`` and the traceback of the exception being handled to the log file at ``path``."""
    with open(path, "a", encoding="utf-8") as log:
        log.write(f"--- {header}\n{traceback.format_exc()}\n")


# ---------------------------------------------------------------------------------------------------------------
# Rank-by-rank sweeps (pointwise, reduce, rows): plan, run, CSV, summary, report
# ---------------------------------------------------------------------------------------------------------------
def rank_plan(cases: list, variants_of) -> list:
    """``(rank, case, settings)`` rank by rank across ``cases``: every case's table setting (``{}``, rank 0),
    then every case's first candidate of ``variants_of(case)``, and so on, so a budget cut drops the least
    promising candidates of every case."""
    depth = 1 + max((len(variants_of(c)) for c in cases), default=0)
    return [(rank, c, s) for rank in range(depth) for c in cases for s in ([{}] + variants_of(c))[rank:rank + 1]]


class CsvRows:
    """A CSV written row by row (header first, the file flushed after each row, so a killed sweep keeps its
    rows); a row's missing fields are empty."""

    def __init__(self, path: str, fields: list[str]):
        self.path, self.fields = path, fields
        self._f = open(path, "w", newline="", encoding="utf-8")
        self._w = csv.DictWriter(self._f, fieldnames=fields)
        self._w.writeheader()

    def write(self, row: dict) -> None:
        self._w.writerow({k: row.get(k, "") for k in self.fields})
        self._f.flush()

    def close(self) -> None:
        self._f.close()


def geomean_by_setting(rows: list, group: str, case_names: list, ok, keep=lambda r: True) -> dict:
    """For the rows of config group ``group`` that pass ``ok`` and ``keep``: each setting's geometric mean of
    GB/s over ``case_names``, for the settings that ran on all of them (``{}`` when none did)."""
    by: dict = {}
    for r in rows:
        if r["rule"] == group and ok(r) and keep(r):
            by.setdefault(r["settings"], {})[r["case"]] = r["gbps"]
    full = {s: v for s, v in by.items() if all(n in v for n in case_names)}
    return {s: math.exp(sum(math.log(max(x, 1e-9)) for x in v.values()) / len(v)) for s, v in full.items()}


class Inputs:
    """Tensors on ``dev`` made from harness.InputSpecs, each made once and shared by every case that names it;
    with ``keep_host`` the host arrays they came from are kept too (for the host-side oracle checks)."""

    def __init__(self, nbx, dev: str, keep_host: bool = False):
        self.nbx, self.dev, self.keep_host = nbx, dev, keep_host
        self._made: dict = {}

    def _get(self, spec):
        if spec not in self._made:
            h = H.host_array(spec)
            t = self.nbx.from_numpy(h)
            self._made[spec] = (t.to(self.dev) if self.dev != "cpu" else t, h if self.keep_host else None)
        return self._made[spec]

    def tensors(self, specs) -> list:
        """The tensors of ``specs``, in order."""
        return [self._get(s)[0] for s in specs]

    def hosts(self, specs) -> list:
        """The host arrays of ``specs`` (``keep_host`` only)."""
        return [self._get(s)[1] for s in specs]


def rows_to_show(rows: list, ok, n_good: int, n_bad: int) -> tuple[list, int]:
    """A case's rows for the printed table: the table variant's, the ``n_good`` fastest checked others and the
    first ``n_bad`` failed others; and how many rows that leaves out."""
    tab = next((r for r in rows if r["variant"] == "table"), None)
    good = sorted((r for r in rows if ok(r) and r is not tab), key=lambda r: -r["gbps"])
    bad = [r for r in rows if not ok(r) and r is not tab]
    return ([tab] if tab else []) + good[:n_good] + bad[:n_bad], max(len(good) - n_good, 0) + max(len(bad) - n_bad, 0)


def best_of_case(rows: list, case_name: str, ok, target_pct: float):
    """For the checked (``ok``) rows of ``case_name``: ``(rows, best, table, gain, flag)``, the fastest row, the
    table variant's row (or ``None``), the gain over it (``"1.23x"``, ``"n/a"``) and ``"  (< 85 %)"`` when the
    best is below ``target_pct`` % of :data:`PEAK_GBPS` (else ``""``); ``None`` when no row passed."""
    rs = [r for r in rows if r["case"] == case_name and ok(r)]
    if not rs:
        return None
    best = max(rs, key=lambda r: r["gbps"])
    tab = next((r for r in rs if r["variant"] == "table"), None)
    gain = f"{best['gbps'] / tab['gbps']:.2f}x" if tab and tab["gbps"] > 0 else "n/a"
    flag = "" if best["pct_of_4800"] >= target_pct else "  (< 85 %)"
    return rs, best, tab, gain, flag


def table_config(state: dict, case_names: list) -> dict:
    """The table's own setting of the first of ``case_names`` that recorded one (``state[name]["table"]``)."""
    return next((state[n]["table"] for n in case_names if state[n]["table"]), {})


def fmt_settings(s: dict) -> str:
    """A variant's settings as compact, key-sorted JSON (the CSV's ``settings``); ``"table"`` for ``{}``."""
    return json.dumps(s, separators=(",", ":"), sort_keys=True) if s else "table"


def ok_row(r: dict) -> bool:
    """Whether a sweep row's variant ran, passed its check (status ``ok...``) and was timed."""
    return str(r.get("status", "")).startswith("ok") and r.get("gbps") is not None


def run_plan(plan: list, *, budget_s: float, t0: float, est: float, make_row, run_variant, writer: CsvRows,
             log_path: str, min_est: float = 0.5) -> tuple[list, int]:
    """Run a :func:`rank_plan` under the budget: skip a variant when ``est`` (seconds, the running estimate of a
    variant's cost, compiles included) would take it past ``budget_s`` from ``t0`` (0: no limit); else make its row
    (``make_row(rank, case, settings) -> dict``) and fill it (``run_variant(row, case, settings, started)``); an
    exception becomes the row's ``status`` (``"error: ..."``, 200 characters) and a traceback in ``log_path``. Each
    row is appended to the CSV ``writer`` as it is done; the writer is closed at the end.

    Returns:
        ``(rows, skipped)``: the rows in run order and how many variants the budget skipped.
    """
    rows: list[dict] = []
    skipped = 0
    for rank, case, settings in plan:
        if budget_s and time.monotonic() - t0 + est > budget_s:
            skipped += 1
            continue
        row = make_row(rank, case, settings)
        t_var = time.monotonic()
        try:
            run_variant(row, case, settings, t_var)
        except Exception as e:  # noqa: BLE001 - record, go on with the next variant
            row["status"] = "error: " + error_text(e, limit=200)
            log_traceback(log_path, f"{case.name} {fmt_settings(settings)}")
        est = max(est * 0.5 + (time.monotonic() - t_var) * 0.5, min_est)
        rows.append(row)
        writer.write(row)
    writer.close()
    return rows, skipped


def report_rank_sweep(name: str, rows: list, cases: list, state: dict, skipped: int, wall: float, budget: float,
                      csv_path: str, notes: list, *, target_pct: float, group_field: str, heading: str,
                      missing: str, case_width: int, group_width: int, rule_config: bool, is_mismatch) -> None:
    """The compact table of a rank-by-rank sweep whose cases have ``name`` and ``group`` and whose ``state[name]``
    holds the table's setting (``"table"``) and the bytes moved (``"bytes"``): per case the table and the best (up
    to 3) checked variants (and the first failed one), then the best per case (names padded to ``case_width``),
    then under ``heading`` per group (the rows' ``group_field``) the setting with the best geometric mean of GB/s
    over the group's cases (settings that ran and matched on all of them; names padded to ``group_width``; with
    ``rule_config`` the table's setting merged with a non-table winner), or ``missing`` (formatted with ``group``,
    ``names`` and ``n``); last a line of counts (mismatches: rows whose status passes ``is_mismatch``)."""
    print()
    for c in cases:
        rs = [r for r in rows if r["case"] == c.name]
        if not rs:
            continue
        print(f"{c.name} [{c.group} {fmt_settings(state[c.name]['table'] or {})}] "
              f"{(state[c.name]['bytes'] or 0) / 2 ** 20:.0f} MiB moved")
        shown, more = rows_to_show(rs, ok_row, 3, 1)
        for r in shown:
            if r.get("gbps") is not None:
                print(f"  {r['variant']:6s} {r['gbps']:8.1f} GB/s {r['pct_of_4800']:5.1f}%  {r['p50_ms']:8.4f} ms  "
                      f"{r['status'][:24]:24s} {r['settings']}")
            else:
                print(f"  {r['variant']:6s} {'-':>8s}                        {r['status'][:60]} {r['settings']}")
        if more:
            print(f"  ... {more} more in the CSV")
    print("\nbest per case (GB/s, % of 4800, x table):")
    for c in cases:
        found = best_of_case(rows, c.name, ok_row, target_pct)
        if found:
            _, best, tab, gain, flag = found
            print(f"  {c.name:{case_width}s} {best['gbps']:8.1f} {best['pct_of_4800']:5.1f}% {gain:>6s} "
                  f"{best['settings']}{flag}")
    print("\n" + heading)
    by_group = [dict(r, rule=r[group_field]) for r in rows]
    for group in sorted({c.group for c in cases}):
        names = [c.name for c in cases if c.group == group]
        gm = geomean_by_setting(by_group, group, names, ok_row)
        if not gm:
            print("  " + missing.format(group=group, names=names, n=len(names)))
            continue
        best = max(gm, key=gm.get)
        base = gm.get("table")
        print(f"  {group:{group_width}s} {best}  geomean {gm[best]:.1f} GB/s"
              + (f" ({gm[best] / base:.2f}x table)" if base else ""))
        if rule_config and best != "table":
            merged = dict(table_config(state, names), **json.loads(best))
            print(f"  {'':{group_width}s} -> rule config {json.dumps(merged, separators=(', ', ': '))}")
    print(f"\n{name}: {len(rows)} variants run, {skipped} skipped for the {budget:.0f} s budget, "
          f"{sum(1 for r in rows if str(r.get('status', '')).startswith('error'))} errors, "
          f"{sum(1 for r in rows if is_mismatch(str(r.get('status', ''))))} mismatches; "
          f"{wall:.0f} s; wrote {csv_path}" + (f"; notes: {'; '.join(notes)}" if notes else ""), flush=True)
