"""Random s_tir loops for differential testing of the pipeline annotations on the CPU.

A generated loop ``for i in range(N)`` (optionally inside an outer serial
loop ``o``) has 2-4 statements, each a ``for j in range(W)`` of one opaque
sblock computing ``dst[j] = f(src..)`` over float32 tiles (small integer
values, so results are exact).  Statement k reads the input ``A`` and/or
tiles written earlier in the same iteration (chains and diamonds); the last
one writes the output ``C[o, i, :]``.  Every intermediate tile has a scope
(global, shared, local) and an allocation site:

* ``param``: a function parameter (TVM never multi-versions it);
* ``outer``: allocated in the root block, used only in the loop (TVM's
  PlanAndUpdateBufferAllocationLocation moves it into the loop body: versioned);
* ``after``: allocated in the root block and read after the loop (copied to
  an output parameter ``D``): not versioned;
* ``inner``: allocated in the loop body block (versioned).

Options: a tile indexed by the iteration (``T[i, j]``, disjoint across
iterations) instead of a scratch tile ``T[j]``; a loop-carried accumulator
(an outer/parameter buffer ``acc[j] += ...``, initialized before the loop,
read after it); a second write of an intermediate (write-after-write).
``build`` returns the TVMScript text, ``tvm.script.from_source`` parses it;
``run_llvm`` compiles it for the CPU and runs it on fixed inputs.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

from tir_gen_strided import StridedSpec, build_strided, strided_params

SITES = ("param", "outer", "after", "inner")
SCOPES = ("global", "shared", "local")


@dataclass(frozen=True)
class Tile:
    name: str
    site: str
    scope: str
    per_iter: bool  # indexed [i, j] (param/outer/after only) instead of [j]


@dataclass(frozen=True)
class Stmt:
    dst: str            # tile name, "C" for the output, "acc" for the accumulator
    srcs: tuple          # tile names or "A"
    op: int             # which arithmetic


@dataclass(frozen=True)
class LoopSpec:
    trip: int
    width: int
    tiles: tuple
    stmts: tuple
    outer: int = 1       # extent of an enclosing serial loop (1: none)
    acc: str | None = None  # None, or the site of the accumulator: "param" / "after"
    extra: tuple = field(default=())

    @property
    def n_stmts(self) -> int:
        return len(self.stmts)


@st.composite
def loop_specs(draw, max_stmts: int = 4):
    trip = draw(st.sampled_from([1, 2, 3, 4, 5, 8]))
    width = draw(st.sampled_from([4, 8]))
    n = draw(st.integers(2, max_stmts))
    n_tiles = n - 1
    tiles = []
    for k in range(n_tiles):
        site = draw(st.sampled_from(SITES))
        scope = draw(st.sampled_from(SCOPES))
        per_iter = site != "inner" and draw(st.booleans())
        tiles.append(Tile(f"T{k}", site, scope, per_iter))
    acc = draw(st.sampled_from([None, None, "param", "after"]))
    stmts = []
    written: list[str] = []
    for k in range(n):
        pool = ["A"] + written
        nsrc = draw(st.integers(1, min(2, len(pool))))
        srcs = tuple(draw(st.lists(st.sampled_from(pool), min_size=nsrc, max_size=nsrc, unique=True)))
        if k < n_tiles:
            # usually a new tile; sometimes re-write an earlier one (write-after-write)
            if written and draw(st.integers(0, 5)) == 0:
                dst = draw(st.sampled_from(written))
            else:
                dst = tiles[len(written)].name if len(written) < n_tiles else written[-1]
        else:
            dst = "C"
        stmts.append(Stmt(dst, srcs, draw(st.integers(0, 2))))
        if dst not in written and dst != "C":
            written.append(dst)
    if acc is not None:
        src = draw(st.sampled_from(["A"] + written))
        pos = draw(st.integers(0, len(stmts)))
        # the accumulator statement must come after the writer of its source
        first = 0 if src == "A" else 1 + next(i for i, s in enumerate(stmts) if s.dst == src)
        stmts.insert(max(pos, first), Stmt("acc", (src,), 0))
    outer = draw(st.sampled_from([1, 1, 1, 2]))
    used = {s.dst for s in stmts} | {x for s in stmts for x in s.srcs}
    tiles = tuple(t for t in tiles if t.name in used)
    return LoopSpec(trip, width, tiles, tuple(stmts), outer, acc)


def _access(spec: LoopSpec, name: str) -> str:
    if name == "A":
        return "A[o, i, j]"
    if name == "C":
        return "C[o, i, j]"
    if name == "acc":
        return "ACC[j]"
    t = next(t for t in spec.tiles if t.name == name)
    return f"{name}[i, j]" if t.per_iter else f"{name}[j]"


_OPS = ("{a} * T.float32(2) + T.float32(1)", "{a} + {b}", "{a} - {b} * T.float32(2)")


def _expr(spec, s: Stmt) -> str:
    a = _access(spec, s.srcs[0])
    b = _access(spec, s.srcs[-1])
    if s.dst == "acc":
        return f"ACC[j] + {a}"
    return _OPS[s.op].format(a=a, b=b)


def build(spec) -> str:
    """TVMScript text (for ``tvm.script.from_source``) of the loop; the pipelined loop is named ``i``."""
    if isinstance(spec, StridedSpec):
        return build_strided(spec)
    N, W, O = spec.trip, spec.width, spec.outer

    def shape(t):
        return f"({N}, {W})" if t.per_iter else f"({W},)"

    params = [f'A: T.Buffer(({O}, {N}, {W}), "float32")', f'C: T.Buffer(({O}, {N}, {W}), "float32")']
    for t in spec.tiles:
        if t.site == "param":
            params.append(f'{t.name}: T.Buffer({shape(t)}, "float32")')
    after = [t for t in spec.tiles if t.site == "after"]
    for t in after:
        params.append(f'D{t.name}: T.Buffer({shape(t)}, "float32")')
    if spec.acc == "param":
        params.append(f'ACC: T.Buffer(({W},), "float32")')
    elif spec.acc == "after":
        params.append(f'DACC: T.Buffer(({W},), "float32")')
    L = ["@T.prim_func(s_tir=True)", f"def main({', '.join(params)}):", '    with T.sblock("root"):']
    ind = " " * 8
    for t in spec.tiles:
        if t.site in ("outer", "after"):
            L.append(f'{ind}{t.name} = T.sblock_alloc_buffer({shape(t)}, "float32", scope="{t.scope}")')
    if spec.acc == "after":
        L.append(f'{ind}ACC = T.sblock_alloc_buffer(({W},), "float32", scope="global")')
    if spec.acc is not None:
        L += [f"{ind}for j in range({W}):", f'{ind}    with T.sblock("acc_init"):',
              f"{ind}        ACC[j] = T.float32(0)"]
    L.append(f"{ind}for o in range({O}):")
    L.append(f"{ind}    for i in range({N}):")
    L.append(f'{ind}        with T.sblock("body"):')
    b = ind + " " * 12
    for t in spec.tiles:
        if t.site == "inner":
            L.append(f'{b}{t.name} = T.sblock_alloc_buffer({shape(t)}, "float32", scope="{t.scope}")')
    for k, s in enumerate(spec.stmts):
        L += [f"{b}for j in range({W}):", f'{b}    with T.sblock("s{k}"):',
              f"{b}        {_access(spec, s.dst)} = {_expr(spec, s)}"]
    for t in after:
        idx = "ia, j" if t.per_iter else "j"
        rng = [f"{ind}for ia in range({N}):", f"{ind}    for j in range({W}):"] if t.per_iter else \
            [f"{ind}for j in range({W}):"]
        pad = "    " * (len(rng) - 1)
        L += rng + [f'{ind}{pad}    with T.sblock("after_{t.name}"):',
                    f"{ind}{pad}        D{t.name}[{idx}] = {t.name}[{idx}]"]
    if spec.acc == "after":
        L += [f"{ind}for j in range({W}):", f'{ind}    with T.sblock("after_acc"):', f"{ind}        DACC[j] = ACC[j]"]
    return "\n".join(L) + "\n"


def parse(text: str):
    import tvm

    return tvm.script.from_source(text)


def param_shapes(spec) -> list[tuple]:
    """Shapes of the parameters of ``build(spec)``, in order."""
    if isinstance(spec, StridedSpec):
        return [s for _, s in strided_params(spec)]
    N, W, O = spec.trip, spec.width, spec.outer
    shp = [(O, N, W), (O, N, W)]
    shp += [((N, W) if t.per_iter else (W,)) for t in spec.tiles if t.site == "param"]
    shp += [((N, W) if t.per_iter else (W,)) for t in spec.tiles if t.site == "after"]
    if spec.acc is not None:
        shp.append((W,))
    return shp


def inputs(spec, seed: int = 0) -> list[np.ndarray]:
    """Deterministic inputs for every parameter: small integers (exact float32 arithmetic)."""
    rng = np.random.default_rng(seed)
    return [rng.integers(-4, 5, size=s).astype("float32") for s in param_shapes(spec)]


def run_llvm(mod_or_func, args: list[np.ndarray]) -> list[np.ndarray]:
    """Compile for the CPU and run on copies of ``args``; returns every parameter's final value."""
    import tvm

    f = tvm.compile(strip_async(mod_or_func), target="llvm")
    ts = [tvm.runtime.tensor(a.copy()) for a in args]
    f(*ts)
    return [t.numpy() for t in ts]


def strip_async(mod_or_func):
    """The module without ``software_pipeline_async_stages`` (cp.async has no CPU lowering; it does not
    change what is computed, only when copies complete)."""
    import tvm
    from tvm_twill.frontend import annotated_pipeline_loops
    from tvm_twill.model.pipeline import ASYNC_STAGES

    sch = tvm.s_tir.Schedule(mod_or_func)
    for ref in annotated_pipeline_loops(sch):
        if ASYNC_STAGES in sch.get(ref.rv).annotations:
            sch.unannotate(ref.rv, ASYNC_STAGES)
    return sch.mod


# -- loops of global->shared copies (cp.async-capable) and one consumer ------------------------------
@dataclass(frozen=True)
class CopyLoopSpec:
    """``for tx (threadIdx.x): for i: copy_k: S_k[tx, :] = X_k[tx, i, :]`` (16-byte vectors, one per copy), then
    ``use: C[tx, i, j] = (sum of the S_k read) * 2``; widths differ so the copies' latencies differ."""

    trip: int
    widths: tuple
    threads: int = 4
    reads: tuple = ()        # which copies the consumer reads (default: all)

    @property
    def used(self) -> tuple:
        return self.reads or tuple(range(len(self.widths)))


@st.composite
def copy_loop_specs(draw):
    n = draw(st.integers(2, 3))
    widths = tuple(draw(st.sampled_from([8, 16, 64, 256])) for _ in range(n))
    reads = () if draw(st.integers(0, 3)) else tuple(sorted(draw(st.sets(st.integers(0, n - 1), min_size=1))))
    return CopyLoopSpec(trip=draw(st.sampled_from([4, 8, 16])), widths=widths, reads=reads)


def build_copy_loop(spec: CopyLoopSpec) -> str:
    """The TVMScript text of a ``CopyLoopSpec`` (function ``f``; parameters X0.., C)."""
    p, w_out = spec.threads, min(spec.widths)
    params = ", ".join(f"X{k}: T.Buffer(({p}, {spec.trip}, {w}), 'float32')" for k, w in enumerate(spec.widths))
    lines = ["@T.prim_func(s_tir=True)", f"def f({params}, C: T.Buffer(({p}, {spec.trip}, {w_out}), 'float32')):",
             f"    for tx in T.thread_binding({p}, thread='threadIdx.x'):",
             f"        for i in T.serial({spec.trip}):", "            with T.sblock('body'):"]
    for k, w in enumerate(spec.widths):
        lines.append(f"                S{k} = T.sblock_alloc_buffer(({p}, {w}), 'float32', scope='shared')")
    for k, w in enumerate(spec.widths):
        lines += [f"                for j0 in range({w // 4}):", "                    for v in T.vectorized(4):",
                  f"                        with T.sblock('copy{k}'):",
                  f"                            S{k}[tx, j0 * 4 + v] = X{k}[tx, i, j0 * 4 + v]"]
    expr = " + ".join(f"S{k}[tx, j]" for k in spec.used)
    lines += [f"                for j in range({w_out}):", "                    with T.sblock('use'):",
              f"                        C[tx, i, j] = ({expr}) * T.float32(2)"]
    return "\n".join(lines) + "\n"


@st.composite
def annotated_copy_loops(draw):
    """(spec, annotation) of a ``CopyLoopSpec``: copies in stages 0..3 (the earliest 0), the consumer in a
    later stage than 0 and no earlier than the copies it reads, any order (the caller skips illegal ones),
    stage 0 asynchronous (TVM's CUDA code generator knows only async queue 0, the queue of stage 0)."""
    from tvm_twill.model.pipeline import PipelineAnnotation

    spec = draw(copy_loop_specs())
    n = len(spec.widths)
    copies = [draw(st.integers(0, 3)) for _ in range(n)]
    copies = [c - min(copies) for c in copies]
    use = draw(st.integers(max(1, *(copies[k] for k in spec.used)), 4))
    stages = (*copies, use)
    seq = draw(st.permutations(range(n + 1)))
    orders = [0] * (n + 1)
    for pos, i in enumerate(seq):
        orders[i] = pos
    return spec, PipelineAnnotation(stages, tuple(orders), (0,))
