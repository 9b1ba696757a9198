"""Random strided loops for differential testing: the hazards that depend on the loop's min and step.

Used through ``tir_gen`` (``tir_gen.build`` / ``inputs`` / ``run_llvm`` take a ``StridedSpec`` too).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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


def strided_params(spec: StridedSpec) -> list[tuple[str, tuple]]:
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
    params = ", ".join(f'{n}: T.Buffer({s}, "float32")' for n, s in strided_params(spec))
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
