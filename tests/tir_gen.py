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
        return [s for _, s in _s_params(spec)]
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


# -- strided loops: steps, mins, offsets, shared (non-versioned) buffers ------------------------------
# A second family, drawn from a seed (``strided_spec(seed)``), for the hazards that depend on the index
# arithmetic of the pipelined loop:
#
#   for o in range(O):                                   # O in {1, 2}: a nest (the pipelined loop inside)
#       for i in T.serial(START, START + EXT, step=STEP):  # STEP 1..4; START = MIN (+ o * SHIFT: symbolic)
#           with T.sblock("body"):
#               s0 .. s{n-1}: for j in T.serial(0, W, step=JS): dst[...] = clamp(f(src[...], ...))
#
# ``G*`` buffers are shared by every iteration (TVM never multi-versions them): a parameter, or allocated
# outside and copied from an input before the nest and to an output after it.  They are indexed
# ``G[(o,) coef * i + off + PAD (+ r), j]``: offsets either side of ``i`` (up to two steps and one element
# away), strides ``coef`` 1 or 2, 1-3 rows ``r`` per access, and are read and written by several
# statements, so write-after-read,
# write-after-write and read-after-write pairs meet at every distance.  ``T*`` tiles are versioned by
# TVM (allocated in the loop body, or outside and used only in the loop): written before they are read
# in the iteration, at the same index (``T[j]`` or ``T[i + off, j]``).  Values are clamped small
# integers (exact, no overflow).

@dataclass(frozen=True)
class Access:
    buf: str   # "A", "C", "G<k>" or "T<k>"
    coef: int = 1
    off: int = 0


@dataclass(frozen=True)
class SStmt:
    dst: Access
    srcs: tuple
    op: int
    jstep: int = 1
    height: int = 1   # rows r = 0 .. height - 1 of each G access: G[coef * i + off + PAD + r, j]


@dataclass(frozen=True)
class StridedSpec:
    start: int          # MIN
    step: int
    trip: int
    ext: int            # extent: ceildiv(ext, step) == trip
    width: int
    outer: int          # O
    shift: int          # 0: START = MIN; else START = o * shift + MIN (a symbolic min)
    shared: tuple       # (name, site "param" / "after", per_o)
    tiles: tuple        # (name, site "inner" / "outer", per_iter, off)
    stmts: tuple
    pad: int

    @property
    def n_stmts(self) -> int:
        return len(self.stmts)

    @property
    def rows(self) -> int:
        """Values of i: 0 <= i < rows."""
        return (self.outer - 1) * self.shift + self.start + self.ext

    def grows(self) -> int:
        return 2 * self.rows + 2 * self.pad + 4  # + the rows of a 3-row access


def strided_spec(seed: int) -> StridedSpec:
    """A random strided loop (deterministic in ``seed``)."""
    rng = np.random.default_rng(seed)
    pick = lambda xs: xs[int(rng.integers(len(xs)))]  # noqa: E731
    step = int(rng.integers(1, 5))
    trip = pick([1, 2, 3, 4, 5, 6, 8])
    ext = step * (trip - 1) + int(rng.integers(1, step + 1))
    start = pick([0, 0, 1, 2, 3, 5])
    outer = pick([1, 1, 2])
    shift = pick([0, step * trip, step, 1]) if outer > 1 else 0
    width = pick([2, 4])
    pad = 2 * step + 1
    shared = tuple((f"G{k}", pick(["param", "after"]), bool(rng.integers(2)) and outer > 1)
                   for k in range(int(rng.integers(1, 3))))
    tiles = tuple((f"T{k}", pick(["inner", "outer"]), bool(rng.integers(2)), int(rng.integers(-step, step + 1)))
                  for k in range(int(rng.integers(0, 3))))
    coefs = {g[0]: pick([1, 1, 1, 2]) for g in shared}

    def g_access():
        name = pick([g[0] for g in shared])
        coef = coefs[name] if rng.integers(6) else 3 - coefs[name]  # sometimes another stride on the same buffer
        return Access(name, coef, int(rng.integers(-pad, pad + 1)))

    n = int(rng.integers(2, 6))
    stmts, written = [], []
    for k in range(n):
        pool = ["A", "G", "G"] + written
        srcs = []
        for _ in range(int(rng.integers(1, 3))):
            s = pick(pool)
            srcs.append(g_access() if s == "G" else Access(s))
        last = k == n - 1
        free = [t[0] for t in tiles if t[0] not in written]
        choice = "C" if last else pick(["G", "G", "C"] + (["T", "T"] if free else []))
        if choice == "T":
            dst = Access(free[0])
            written.append(free[0])
        else:
            dst = g_access() if choice == "G" else Access("C")
        jstep = 1 if choice == "T" else pick([1, 1, 1, 2])
        height = 1 if choice == "T" else pick([1, 1, 2, 3])
        stmts.append(SStmt(dst, tuple(srcs), int(rng.integers(3)), jstep, height))
    used = {a.buf for s in stmts for a in (s.dst, *s.srcs)}
    return StridedSpec(start, step, trip, ext, width, outer, shift, tuple(g for g in shared if g[0] in used),
                       tuple(t for t in tiles if t[0] in used), tuple(stmts), pad)


def _s_index(spec: StridedSpec, a: Access, height: int = 1) -> str:
    if a.buf in ("A", "C"):
        return f"{a.buf}[o, i, j]"
    g = next((g for g in spec.shared if g[0] == a.buf), None)
    if g is not None:
        row = f"{a.coef} * i + {a.off + spec.pad}" if a.coef != 1 else f"i + {a.off + spec.pad}"
        row += " + r" if height > 1 else ""
        return f"{a.buf}[o, {row}, j]" if g[2] else f"{a.buf}[{row}, j]"
    t = next(t for t in spec.tiles if t[0] == a.buf)
    return f"{a.buf}[i + {t[3] + spec.pad}, j]" if t[2] else f"{a.buf}[j]"


_S_OPS = ("{a} * T.float32(2) + T.float32(1)", "{a} + {b}", "{a} - {b} * T.float32(2)")


def _s_shapes(spec: StridedSpec) -> dict:
    outer, rows, w = spec.outer, spec.rows, spec.width
    out = {"A": (outer, rows, w), "C": (outer, rows, w)}
    for name, _, per_o in spec.shared:
        out[name] = (outer, spec.grows(), w) if per_o else (spec.grows(), w)
    for name, _, per_iter, _ in spec.tiles:
        out[name] = (rows + 2 * spec.pad + 1, w) if per_iter else (w,)
    return out


def _s_params(spec: StridedSpec) -> list[tuple[str, tuple]]:
    shp = _s_shapes(spec)
    params = [("A", shp["A"]), ("C", shp["C"])]
    params += [(g[0], shp[g[0]]) for g in spec.shared if g[1] == "param"]
    for g in spec.shared:
        if g[1] == "after":
            params += [(f"I{g[0]}", shp[g[0]]), (f"D{g[0]}", shp[g[0]])]
    return params


def _s_copy(ind: str, shape: tuple, dst: str, src: str, block: str) -> list[str]:
    vs = ["v0", "v1", "v2"][:len(shape)]
    L = [f"{ind}{'    ' * k}for {v} in range({n}):" for k, (v, n) in enumerate(zip(vs, shape))]
    pad = ind + "    " * len(shape)
    idx = ", ".join(vs)
    return L + [f'{pad}with T.sblock("{block}"):', f"{pad}    {dst}[{idx}] = {src}[{idx}]"]


def build_strided(spec: StridedSpec) -> str:
    """TVMScript text of a strided loop (the pipelined loop is ``i``, its body block ``body``)."""
    shp = _s_shapes(spec)
    params = ", ".join(f'{n}: T.Buffer({s}, "float32")' for n, s in _s_params(spec))
    L = ["@T.prim_func(s_tir=True)", f"def main({params}):", '    with T.sblock("root"):']
    ind = " " * 8
    for name, site, _ in spec.shared:
        if site == "after":
            L.append(f'{ind}{name} = T.sblock_alloc_buffer({shp[name]}, "float32", scope="shared")')
    for name, site, _, _ in spec.tiles:
        if site == "outer":
            L.append(f'{ind}{name} = T.sblock_alloc_buffer({shp[name]}, "float32", scope="shared")')
    for name, site, _ in spec.shared:
        if site == "after":
            L += _s_copy(ind, shp[name], name, f"I{name}", f"init_{name}")
    start = f"o * {spec.shift} + {spec.start}" if spec.shift else f"{spec.start}"
    L.append(f"{ind}for o in range({spec.outer}):")
    L.append(f"{ind}    for i in T.serial({start}, {start} + {spec.ext}, step={spec.step}):")
    L.append(f'{ind}        with T.sblock("body"):')
    b = ind + " " * 12
    for name, site, _, _ in spec.tiles:
        if site == "inner":
            L.append(f'{b}{name} = T.sblock_alloc_buffer({shp[name]}, "float32", scope="shared")')
    for k, s in enumerate(spec.stmts):
        a, c = _s_index(spec, s.srcs[0], s.height), _s_index(spec, s.srcs[-1], s.height)
        expr = _S_OPS[s.op].format(a=a, b=c)
        loop = f"T.serial(0, {spec.width}, step={s.jstep})" if s.jstep != 1 else f"range({spec.width})"
        r = "    " if s.height > 1 else ""
        L += [f"{b}for r in range({s.height}):"] if s.height > 1 else []
        L += [f"{b}{r}for j in {loop}:", f'{b}{r}    with T.sblock("s{k}"):',
              f"{b}{r}        {_s_index(spec, s.dst, s.height)} = "
              f"T.max(T.min({expr}, T.float32(999)), T.float32(-999))"]
    for name, site, _ in spec.shared:
        if site == "after":
            L += _s_copy(ind, shp[name], f"D{name}", name, f"after_{name}")
    return "\n".join(L) + "\n"
