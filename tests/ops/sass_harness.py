"""sm_90 compiles of the row kernels (softmax, norms) as Triton's JIT specializes a launch, and their SASS loops.

``compile_sm90_jit`` marks pointer arguments 16-byte aligned and int arguments divisible by 16 (given their
run-time values) as the JIT does, so contiguous loads vectorize as on the GPU; ``loops`` finds the SASS loops
(a label and the backward branch to it) and counts their instructions by opcode.
"""

from __future__ import annotations

import collections
import re


def compile_sm90_jit(fn, types: dict, constexprs: dict, values: dict | None = None, num_warps: int = 4):
    """Compile ``@jit`` kernel ``fn`` for sm_90: ``types`` maps every non-constexpr argument to Triton's signature
    type; pointers are marked 16-byte aligned, ints whose ``values`` entry is divisible by 16 so marked."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    values = values or {}
    # the kernels' variant keys (parameters with defaults, off) that the caller does not name
    constexprs = dict({p.name: p.default for p in fn.params if p.has_default and p.name not in types}, **constexprs)
    sig, attrs = {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in constexprs:
            sig[name] = "constexpr"
            continue
        sig[name] = types[name]
        if types[name].startswith("*") or (isinstance(values.get(name), int) and values[name] % 16 == 0):
            attrs[(i,)] = [["tt.divisibility", 16]]
    return triton.compile(ASTSource(fn=fn, signature=sig, constexprs=constexprs, attrs=attrs),
                          target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps,
                                                                     "enable_reflect_ftz": False})


def opcodes(lines) -> list[str]:
    ops = []
    for line in lines:
        if "\t" not in line or line.startswith("Function"):
            continue
        op = line.split("\t", 1)[1].strip()
        op = op.split()[1] if op.startswith("@") else op.split()[0]
        if not op.startswith("NOP"):
            ops.append(op)
    return ops


def loops(sass: str) -> list[collections.Counter]:
    """Opcode counts of each innermost SASS loop (a label with a backward branch to it, no other loop inside), in
    the order of the code; the self-branch ptxas puts after the last EXIT is not counted."""
    lines = sass.splitlines()
    labels = {ln.rstrip(":"): i for i, ln in enumerate(lines) if re.match(r"^\.?L\w*:$|^LBB\d+:$", ln.strip())}
    spans = []
    for i, ln in enumerate(lines):
        m = re.search(r"BRA (\.?L\w+)", ln)
        if m and labels.get(m.group(1), i + 1) < i:
            spans.append((labels[m.group(1)], i))
    inner = [s for s in spans if not any(o != s and s[0] <= o[0] and o[1] <= s[1] for o in spans)]
    counts = [collections.Counter(opcodes(lines[a:b + 1])) for a, b in sorted(inner)]
    return [c for c in counts if sum(c.values()) > c["BRA"]]  # not the trap loop after EXIT (a lone BRA)


def registers(compiled) -> int:
    """Registers per thread of a compiled kernel (Triton's bundled ``cuobjdump --dump-resource-usage``)."""
    import os
    import subprocess
    import tempfile

    import triton
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(compiled.asm["cubin"])
    try:
        out = subprocess.run([tool, "--dump-resource-usage", f.name], capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(f.name)
    return int(re.search(r"REG:(\d+)", out).group(1))
