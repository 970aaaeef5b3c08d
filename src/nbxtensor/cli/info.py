"""``nbx info``: what this process runs on.

Prints the Python, NumPy, ml_dtypes, Triton and cuda-bindings versions, the CUDA driver version, every CUDA
device with its driver-reported properties and its architecture facts (``device/facts/sm<XY>.json``),
which fast path cached kernel launches take (the C one of ``runtime/_fastlaunch.c``, or the Python one and why),
and whether ``torch`` is imported (it never should be). ``--json`` prints the same as one JSON object.
"""

from __future__ import annotations

import json
import platform
import sys

__all__ = ["add_arguments", "run", "collect"]


def add_arguments(p) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def _version(mod: str) -> str | None:
    try:
        from importlib.metadata import version
        return version(mod)
    except Exception:
        return None


def collect() -> dict:
    """Everything ``nbx info`` reports, as a dict."""
    import numpy as np

    import nbxtensor as nbx
    from nbxtensor.device.cuda import driver as D
    from nbxtensor.device.facts import MissingFactError, facts
    from nbxtensor.runtime.triton_compat import HAVE_TRITON, INTERPRET, triton

    out: dict = {
        "nbxtensor": nbx.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "numpy": np.__version__,
        "ml_dtypes": _version("ml_dtypes"),
        "triton": getattr(triton, "__version__", None) if HAVE_TRITON else None,
        "triton_interpret": INTERPRET,
        "cuda_bindings": _version("cuda-bindings") or _version("cuda-python"),
        "cuda_available": nbx.cuda.is_available(),
        "cuda_unavailable_reason": D.unavailable_reason(),
        "driver_version": None,
        "devices": [],
    }
    if out["cuda_available"]:
        v = nbx.cuda.driver_version()
        out["driver_version"] = f"{v // 1000}.{(v % 1000) // 10}"
        for i in range(nbx.cuda.device_count()):
            p = nbx.cuda.get_device_properties(i)
            free, total = nbx.cuda.mem_get_info(i)
            dev = {"index": i, "name": p.name, "arch": p.arch, "compute_capability": [p.major, p.minor],
                   "multi_processor_count": p.multi_processor_count, "total_memory": p.total_memory,
                   "free_memory": free, "L2_cache_size": p.L2_cache_size,
                   "shared_memory_per_block_optin": p.shared_memory_per_block_optin,
                   "clock_rate_khz": p.clock_rate_khz, "memory_clock_rate_khz": p.memory_clock_rate_khz,
                   "memory_bus_width": p.memory_bus_width, "pci_bus_id": p.pci_bus_id, "uuid": p.uuid}
            try:
                dev["facts"] = facts(p.arch)
            except MissingFactError as e:
                dev["facts"] = None
                dev["facts_error"] = str(e)
            out["devices"].append(dev)
    from nbxtensor.runtime import fastlaunch
    fastlaunch.load()   # builds runtime/_fastlaunch.c on the first call (cached by Triton); never raises
    out["launch_path"] = fastlaunch.status()
    out["torch_imported"] = "torch" in sys.modules and sys.modules["torch"] is not None
    return out


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB"


def run(args) -> int:
    info = collect()
    if getattr(args, "json", False):
        print(json.dumps(info, indent=1, default=str))
        return 0
    print(f"nbxtensor   {info['nbxtensor']}")
    print(f"python      {info['python']} ({info['platform']})")
    print(f"numpy       {info['numpy']}")
    print(f"ml_dtypes   {info['ml_dtypes']}")
    print(f"triton      {info['triton'] or 'not installed'}"
          f"{' (interpreter tier: NBX_TRITON_INTERPRET=1)' if info['triton_interpret'] else ''}")
    print(f"cuda-bindings {info['cuda_bindings'] or 'not installed'}")
    print(f"launch      {info['launch_path']}")
    if not info["cuda_available"]:
        print(f"CUDA        not available: {info['cuda_unavailable_reason']}")
    else:
        print(f"CUDA driver {info['driver_version']}, {len(info['devices'])} device(s)")
    for d in info["devices"]:
        print(f"  cuda:{d['index']}  {d['name']}  {d['arch']} (compute capability {d['compute_capability'][0]}."
              f"{d['compute_capability'][1]})  {d['multi_processor_count']} SMs  {_gib(d['total_memory'])} "
              f"({_gib(d['free_memory'])} free)  L2 {d['L2_cache_size'] >> 20} MiB  bus {d['pci_bus_id']}")
        f = d["facts"]
        if f is None:
            print(f"    facts: {d['facts_error']}")
            continue
        mu = f["matrix_unit"]
        print(f"    facts ({f['name']}): smem/block opt-in {f['smem_per_block_optin']} B, smem/SM {f['smem_per_sm']} "
              f"B, {f['registers_per_sm']} registers/SM, warp {f['warp_size']}, {f['max_threads_per_sm']} "
              f"threads/SM, TMA {'yes' if f['tma'] else 'no'}")
        print(f"    matrix unit: {mu['name']}; dtypes {', '.join(mu['dtypes'])}")
        if f["smem_per_block_optin"] != d["shared_memory_per_block_optin"]:
            print(f"    WARNING: the facts file says {f['smem_per_block_optin']} B of shared memory per block, the "
                  f"driver {d['shared_memory_per_block_optin']} B")
    print(f"torch imported: {'YES (nbxtensor never imports it)' if info['torch_imported'] else 'no'}")
    return 0
