"""Random strided loops for differential testing: the hazards that depend on the loop's min and step.

Used through ``tir_gen`` (``tir_gen.build`` / ``inputs`` / ``run_llvm`` take a ``StridedSpec`` too).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

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
#
# Views (issue #38): most ``G*`` buffers also get a view of their storage, declared at one level
# (``VIEW_LEVELS``), and each access of such a buffer goes through the view or to the buffer itself
# (drawn per access, so one loop reads a row directly and writes it through the view):
#
#   "stmt"       T.match_buffer(G[row, 0:W], (W,)) in the statement's own block, one per access: Gv[j]
#   "body"       T.match_buffer(G[(o,) 0:R, 0:W], (R, W)) in the pipelined loop's body block
#   "outer"      the same in a block around the pipelined loop (inside the nest's o loop)
#   "root"       T.match_buffer(G[0:..., 0:W]) of the whole buffer in the root block (parameters)
#   "decl"       T.decl_buffer(G's shape, data=G.data): at function level (a parameter) or in the root
#                block after G's allocation
#   "decl_flat"  T.decl_buffer((size,), data=G.data), indexed Gv[(row) * W + j]: one flat pointer
#
# The view choices come from their own generator (``_with_views``): the loop's structure for a seed is
# the one drawn before views existed.

#: Where a view of a ``G*`` buffer is declared (see the comment above).
VIEW_LEVELS = ("stmt", "body", "outer", "root", "decl", "decl_flat")


@dataclass(frozen=True)
class Access:
    buf: str   # "A", "C", "G<k>" or "T<k>"
    coef: int = 1
    off: int = 0
    via: bool = False  # through the buffer's view (``StridedSpec.views``)


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
    views: tuple = ()   # (G name, level in VIEW_LEVELS): the view of that buffer

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
    return _with_views(StridedSpec(start, step, trip, ext, width, outer, shift,
                                   tuple(g for g in shared if g[0] in used),
                                   tuple(t for t in tiles if t[0] in used), tuple(stmts), pad), seed)


def _with_views(spec: StridedSpec, seed: int) -> StridedSpec:
    """``spec`` with views of its ``G*`` buffers (two in three get one), each access through the view or not."""
    rng = np.random.default_rng([seed, 38])
    views = []
    for name, site, _ in spec.shared:
        levels = [lv for lv in VIEW_LEVELS if not (lv == "root" and site == "after")]  # root: a parameter's
        level = levels[int(rng.integers(len(levels)))]
        if rng.integers(3):
            views.append((name, level))
    names = {v[0] for v in views}

    def via(a: Access) -> Access:
        return replace(a, via=bool(rng.integers(2))) if a.buf in names else a

    stmts = tuple(replace(s, dst=via(s.dst), srcs=tuple(via(a) for a in s.srcs)) for s in spec.stmts)
    return replace(spec, stmts=stmts, views=tuple(views))


def _view_level(spec: StridedSpec, name: str) -> str | None:
    return next((lv for n, lv in spec.views if n == name), None)


def _s_row(spec: StridedSpec, a: Access, height: int) -> str:
    row = f"{a.coef} * i + {a.off + spec.pad}" if a.coef != 1 else f"i + {a.off + spec.pad}"
    return row + (" + r" if height > 1 else "")


def _s_index(spec: StridedSpec, a: Access, height: int = 1, view: str | None = None) -> str:
    """The access as TVMScript; ``view``: the name of a statement-level view of its row (level "stmt")."""
    if a.buf in ("A", "C"):
        return f"{a.buf}[o, i, j]"
    g = next((g for g in spec.shared if g[0] == a.buf), None)
    if g is not None:
        row = _s_row(spec, a, height)
        level = _view_level(spec, a.buf) if a.via else None
        if level == "stmt":
            return f"{view}[j]"
        if level in ("body", "outer"):  # a view of the rows of G (of G[o] in a nest)
            return f"{a.buf}v[{row}, j]"
        if level == "decl_flat":
            first = f"o * {spec.grows()} + {row}" if g[2] else row
            return f"{a.buf}v[({first}) * {spec.width} + j]"
        name = f"{a.buf}v" if level is not None else a.buf  # "root", "decl": the shape of G
        return f"{name}[o, {row}, j]" if g[2] else f"{name}[{row}, j]"
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


def _view_decl(spec: StridedSpec, name: str, level: str) -> str:
    """The declaration of ``name``'s view at ``level`` (not "stmt": ``_stmt_view``)."""
    shp = _s_shapes(spec)[name]
    site, per_o = next((g[1], g[2]) for g in spec.shared if g[0] == name)
    scope = ', scope="shared"' if site == "after" else ""
    if level in ("decl", "decl_flat"):
        shape = shp if level == "decl" else (int(np.prod(shp)),)
        return f'{name}v = T.decl_buffer({shape}, "float32", data={name}.data{scope})'
    if level == "root":
        region = ", ".join(f"0:{n}" for n in shp)
        return f'{name}v = T.match_buffer({name}[{region}], {shp}, "float32"{scope})'
    rows = f"o, 0:{spec.grows()}, 0:{spec.width}" if per_o else f"0:{spec.grows()}, 0:{spec.width}"
    return (f'{name}v = T.match_buffer({name}[{rows}], ({spec.grows()}, {spec.width}), "float32", '
            f"offset_factor=1{scope})")


def _stmt_view(spec: StridedSpec, a: Access, height: int, view: str) -> str:
    """A statement-level view ``view`` of the row ``a`` reads or writes (level "stmt")."""
    site, per_o = next((g[1], g[2]) for g in spec.shared if g[0] == a.buf)
    scope = ', scope="shared"' if site == "after" else ""
    row = ("o, " if per_o else "") + _s_row(spec, a, height)
    return (f'{view} = T.match_buffer({a.buf}[{row}, 0:{spec.width}], ({spec.width},), "float32", '
            f"offset_factor=1{scope})")


def _views_at(spec: StridedSpec, levels, site=None) -> list[str]:
    return [_view_decl(spec, n, lv) for n, lv in spec.views if lv in levels
            and (site is None or next(g[1] for g in spec.shared if g[0] == n) == site)]


def build_strided(spec: StridedSpec) -> str:
    """TVMScript text of a strided loop (the pipelined loop is ``i``, its body block ``body``)."""
    shp = _s_shapes(spec)
    params = ", ".join(f'{n}: T.Buffer({s}, "float32")' for n, s in strided_params(spec))
    L = ["@T.prim_func(s_tir=True)", f"def main({params}):"]
    top = _views_at(spec, ("decl", "decl_flat"), "param")  # at function level: the implicit root block holds them
    L += [f"    {d}" for d in top] + [f'    with T.sblock("{"nest" if top else "root"}"):']
    ind = " " * 8
    L += [f"{ind}{d}" for d in _views_at(spec, ("root",))]
    for name, site, _ in spec.shared:
        if site == "after":
            L.append(f'{ind}{name} = T.sblock_alloc_buffer({shp[name]}, "float32", scope="shared")')
    for name, site, _, _ in spec.tiles:
        if site == "outer":
            L.append(f'{ind}{name} = T.sblock_alloc_buffer({shp[name]}, "float32", scope="shared")')
    after = _views_at(spec, ("decl", "decl_flat"), "after")
    # a decl_buffer inside the block: the regions TVMScript would infer for it would name the view
    L += [f"{ind}T.reads()", f"{ind}T.writes()"] + [f"{ind}{d}" for d in after] if after else []
    for name, site, _ in spec.shared:
        if site == "after":
            L += _s_copy(ind, shp[name], name, f"I{name}", f"init_{name}")
    start = f"o * {spec.shift} + {spec.start}" if spec.shift else f"{spec.start}"
    L.append(f"{ind}for o in range({spec.outer}):")
    o = ind + "    "
    if _views_at(spec, ("outer",)):  # a block around the pipelined loop
        L += [f'{o}with T.sblock("outer"):'] + [f"{o}    {d}" for d in _views_at(spec, ("outer",))]
        o += "    "
    L.append(f"{o}for i in T.serial({start}, {start} + {spec.ext}, step={spec.step}):")
    L.append(f'{o}    with T.sblock("body"):')
    b = o + " " * 8
    for name, site, _, _ in spec.tiles:
        if site == "inner":
            L.append(f'{b}{name} = T.sblock_alloc_buffer({shp[name]}, "float32", scope="shared")')
    L += [f"{b}{d}" for d in _views_at(spec, ("body",))]
    for k, s in enumerate(spec.stmts):
        accesses = {"d": s.dst, "a": s.srcs[0], "c": s.srcs[-1]}
        local = {p: f"{x.buf}v{k}{p}" for p, x in accesses.items() if x.via and _view_level(spec, x.buf) == "stmt"}
        idx = {p: _s_index(spec, x, s.height, local.get(p)) for p, x in accesses.items()}
        expr = _S_OPS[s.op].format(a=idx["a"], b=idx["c"])
        loop = f"T.serial(0, {spec.width}, step={s.jstep})" if s.jstep != 1 else f"range({spec.width})"
        r = "    " if s.height > 1 else ""
        L += [f"{b}for r in range({s.height}):"] if s.height > 1 else []
        L += [f"{b}{r}for j in {loop}:", f'{b}{r}    with T.sblock("s{k}"):']
        L += [f"{b}{r}        {_stmt_view(spec, accesses[p], s.height, v)}" for p, v in local.items()]
        L += [f"{b}{r}        {idx['d']} = T.max(T.min({expr}, T.float32(999)), T.float32(-999))"]
    for name, site, _ in spec.shared:
        if site == "after":
            L += _s_copy(ind, shp[name], f"D{name}", name, f"after_{name}")
    return "\n".join(L) + "\n"
