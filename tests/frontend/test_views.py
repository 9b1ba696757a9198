"""Views of a buffer's storage (match_buffer, decl_buffer with data=) are the buffer they view (issue #38).

The loop of the issue reads a parameter ``G`` directly and writes the same rows through a view ``Gv``
declared outside the statements.  The front-end compared buffers by name, and dropped the view's accesses
altogether (TVM's region detector reports only the buffers it is given), so the graph had no edge from
the read to the write: the plan (sm_80, default options) put the write 6 stages ahead of the read and 244
elements of ``C`` came out wrong on llvm.  ``frontend/views.py`` resolves every access to the buffer that
owns the storage before the hazards are computed.
"""
import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

import tir_gen  # noqa: E402
from tvm_twill.api import auto_pipeline  # noqa: E402
from tvm_twill.errors import UnsupportedLoopError  # noqa: E402
from tvm_twill.frontend import extract_loop  # noqa: E402
from tvm_twill.transforms import statement_deps  # noqa: E402
from tvm_twill.check.verify import cpu_runnable  # noqa: E402

HEAD = ('@T.prim_func(s_tir=True)\n'
        'def main(A: T.Buffer((4, 72, 8), "float32"), G: T.Buffer((4, 72), "float32"), '
        'C: T.Buffer((4, 72), "float32")):\n')
ROW_VIEW = 'Gv = T.match_buffer(G[tx, 0:72], (72,), "float32", offset_factor=1)'
#: where the view is declared -> (the declaration, where it goes, how the write indexes it)
KINDS = {
    "match_buffer in a block around the loop": (ROW_VIEW, "outer", "Gv[i]"),
    "match_buffer in the root block": ('Gv = T.match_buffer(G[0:4, 0:72], (4, 72), "float32")', "root",
                                       "Gv[tx, i]"),
    "match_buffer in the loop's body block": (ROW_VIEW, "body", "Gv[i]"),
    "match_buffer in the statement's block": (ROW_VIEW.replace("0:72", "i:i + 1").replace("(72,)", "(1,)"),
                                              "stmt", "Gv[0]"),
    "decl_buffer at function level": ('Gv = T.decl_buffer((4, 72), "float32", data=G.data)', "top", "Gv[tx, i]"),
    "flat decl_buffer at function level": ('Gv = T.decl_buffer((288,), "float32", data=G.data)', "top",
                                           "Gv[tx * 72 + i]"),
    "decl_buffer with an offset": ('Gv = T.decl_buffer((216,), "float32", data=G.data, elem_offset=72)', "top",
                                   "Gv[tx * 72 + i - 72]"),
    "match_buffer of a flat decl_buffer": ('Gf = T.decl_buffer((288,), "float32", data=G.data)\n'
                                           'Gv = T.match_buffer(Gf[tx * 72:tx * 72 + 72], (72,), "float32", '
                                           'offset_factor=1)', "top+outer", "Gv[i]"),
}


def kernel(kind: str, ahead: int = 1, thread: bool = False) -> str:
    """The loop of the issue: ``wr`` writes row i of G through the view, ``rd`` reads row i + ``ahead`` of
    G itself, after a shared tile ``S`` whose copy's latency the plan hides; so iteration i + ahead's
    write must not run before iteration i's read."""
    decl, where, target = KINDS[kind]
    if where == "top+outer":  # the decl_buffer at function level, the match_buffer of it around the loop
        top, decl, where = decl.split("\n")[0], decl.split("\n")[1], "outer"
    else:
        top = decl if where == "top" else None
    tx = 'T.thread_binding(4, thread="threadIdx.x")' if thread else "range(4)"
    lines = ['for i in T.serial(64):',
             '    with T.sblock("body"):',
             '        S = T.sblock_alloc_buffer((8,), "float32", scope="shared")',
             *([f"        {decl}"] if where == "body" else []),
             '        for j in range(8):',
             '            with T.sblock("wr"):',
             *([f"                {decl}"] if where == "stmt" else []),
             '                S[j] = A[tx, i, j]',
             f'                {target} = A[tx, i, 0] * T.float32(3)',
             '        with T.sblock("rd"):',
             f'            C[tx, i] = G[tx, i + {ahead}] + S[0] + S[7]']
    loop = "\n".join(lines)
    text = HEAD + (f"    {top}\n" if top else "")
    if where == "root":
        text += f'    with T.sblock("root"):\n        {decl}\n        for tx in {tx}:\n' + _indent(loop, 12)
    elif where == "outer":
        text += f'    for tx in {tx}:\n        with T.sblock("outer"):\n            {decl}\n' + _indent(loop, 12)
    else:
        text += f"    for tx in {tx}:\n" + _indent(loop, 8)
    return text


def _indent(text: str, n: int) -> str:
    return "".join(" " * n + ln + "\n" for ln in text.rstrip("\n").split("\n"))


def _args():
    rng = np.random.default_rng(5)
    return [rng.integers(-4, 5, size=(4, 72, 8)).astype("float32"), rng.integers(-4, 5, size=(4, 72)).astype("float32"),
            np.zeros((4, 72), "float32")]


def _numpy(ahead: int):
    """What the loop computes, in numpy: row i of G is written (3 A[tx, i, 0]) before row i + ahead is read."""
    a, g, c = _args()
    c[:, :64] = g[:, ahead:64 + ahead] + a[:, :64, 0] + a[:, :64, 7]
    g = g.copy()
    g[:, :64] = 3 * a[:, :64, 0]
    return [a, g, c]


def _war_on_g(ex):
    return [(h.src, h.dst, h.kind, h.distance, h.reason) for h in ex.hazards if h.buffer == "G"]


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_write_through_a_view_is_a_hazard_of_the_buffer_it_views(kind):
    """The graph has the write-after-read edge rd -> wr at distance 1, and the plan is right (or not applied)."""
    func = tir_gen.parse(kernel(kind))
    ex = extract_loop(tvm.s_tir.Schedule(func), "i", "sm_80")
    assert ex.names == ["wr", "rd"] and "G" in ex.stmts[0].writes and "Gv" not in ex.stmts[0].writes
    assert (1, 0, 1) in statement_deps(ex.graph)
    assert _war_on_g(ex)[0][:4] == (1, 0, "war", 1)
    sch = tvm.s_tir.Schedule(func)
    plan = auto_pipeline(sch, "i", "sm_80")
    assert not plan.applied or plan.check_on_cpu().ok, plan.check_on_cpu()
    assert _wrong(func, sch.mod) == 0


def _wrong(func, mod) -> int:
    args = _args()
    return sum(int((o != r).sum()) for o, r in zip(tir_gen.run_llvm(mod, args), tir_gen.run_llvm(func, args)))


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "match_buffer in the statement's block"])
def test_the_distance_through_a_view_is_exact_and_the_pipelined_loop_is_numpys(kind):
    """Row i + 4 read, row i written through the view: 4 iterations apart, proven from the index arithmetic
    (a view of rows maps index for index, a decl_buffer as addresses); the plan pipelines the loop and it
    computes what numpy does, with threadIdx.x bound as in the issue."""
    func = tir_gen.parse(kernel(kind, ahead=4, thread=True))
    sch = tvm.s_tir.Schedule(func)
    plan = auto_pipeline(sch, "i", "sm_80")
    assert _war_on_g(plan.extraction) == [(1, 0, "war", 4, "")]
    assert plan.applied and plan.annotation.num_stages > 1
    assert plan.check_on_cpu().ok
    out = tir_gen.run_llvm(cpu_runnable(sch.mod, "the planned loop"), _args())  # threadIdx.x as a serial loop
    for got, want in zip(out, _numpy(4)):
        np.testing.assert_array_equal(got, want)


def test_two_views_of_one_pointer_are_one_buffer():
    """The read through one decl_buffer of G's data, the write through another: still G's hazard, 4 apart."""
    text = kernel("decl_buffer at function level", ahead=4).replace(
        "G[tx, i + 4]", "Gw[tx * 72 + i + 4]").replace(
        "    Gv = T.decl_buffer", '    Gw = T.decl_buffer((288,), "float32", data=G.data)\n    Gv = T.decl_buffer')
    func = tir_gen.parse(text)
    sch = tvm.s_tir.Schedule(func)
    plan = auto_pipeline(sch, "i", "sm_80")
    assert _war_on_g(plan.extraction) == [(1, 0, "war", 4, "")]
    assert plan.extraction.stmts[1].reads == ("G", "S")
    assert plan.applied and plan.check_on_cpu().ok and _wrong(func, sch.mod) == 0


def test_the_loop_of_the_issue_was_pipelined_wrongly():
    """What the plan did before views were resolved (stages (0, 6): 244 wrong elements), now illegal."""
    from tvm_twill.model.pipeline import PipelineAnnotation
    from tvm_twill.transforms import legality_violations

    ex = extract_loop(tvm.s_tir.Schedule(tir_gen.parse(kernel("match_buffer in a block around the loop"))), "i",
                      "sm_80")
    assert legality_violations(PipelineAnnotation((0, 6), (0, 1)), ex.graph)


# -- the resolution itself --------------------------------------------------------------------------------
def _regions(kind: str, ahead: int = 1):
    """``Views`` of the kernel and the (reads, writes) regions of its two statements, resolved."""
    from tvm_twill.frontend.costs import StatementAnalyzer
    from tvm_twill.frontend.hazards import statement_regions
    from tvm_twill.frontend.loops import pipeline_children, resolve_loop
    from tvm_twill.frontend.target import machine_for
    from tvm_twill.frontend.views import Views

    func = tir_gen.parse(kernel(kind, ahead))
    sch = tvm.s_tir.Schedule(func)
    ref = resolve_loop(sch, "i")
    an = StatementAnalyzer(sch.mod["main"], ref, machine_for("sm_80", None))
    views = Views(sch.mod["main"])
    out = []
    for c in pipeline_children(ref.node, "i"):
        r, w = statement_regions(c, an.buffer_map)
        out.append((views.resolve_regions(r, {}), views.resolve_regions(w, {})))
    return views, out


def _text(regs):
    return [[(str(x.min), str(x.extent)) for x in r.region] for r in regs]


@pytest.mark.parametrize("kind, write", [
    ("match_buffer in a block around the loop", [[("tx", "1"), ("i", "1")]]),  # G[tx, 0 + i]
    ("match_buffer in the root block", [[("tx", "1"), ("i", "1")]]),
    ("decl_buffer at function level", [[("tx * 72 + i", "1")]]),  # addresses: G is compared flat
    ("decl_buffer with an offset", [[("tx * 72 + i", "1")]]),  # elem_offset 72 + (tx * 72 + i - 72)
    ("match_buffer of a flat decl_buffer", [[("tx * 72 + i", "1")]]),
])
def test_a_view_access_becomes_one_of_the_buffer_it_views(kind, write):
    views, [(_, w0), (r1, _)] = _regions(kind)
    assert "Gv" not in w0 and _text(w0["G"]) == write
    # G's own read in the same coordinates: flat too when the write is
    flat = len(write[0]) == 1
    assert _text(r1["G"]) == ([[("tx * 72 + i + 1", "1")]] if flat else [[("tx", "1"), ("i + 1", "1")]])
    assert views.names(["Gv", "S"]) == ["G", "S"]


def test_a_view_that_cannot_be_placed_is_the_whole_buffer():
    """A decl_buffer over an address expression (not a buffer's data pointer) may alias any element of G."""
    KINDS["address"] = ('Gv = T.decl_buffer((72,), "float32", data=T.address_of(G[1, 0]))', "top", "Gv[i]")
    try:
        _, [(_, w0), (r1, _)] = _regions("address")
        assert _text(w0["G"]) == [[("0", "4"), ("0", "72")]]  # every element of G
        assert _text(r1["G"]) == [[("tx", "1"), ("i + 1", "1")]]
        ex = extract_loop(tvm.s_tir.Schedule(tir_gen.parse(kernel("address", ahead=4))), "i", "sm_80")
        # the write may meet the read in the iteration and in every later one: kept in order throughout
        assert [h[:4] for h in _war_on_g(ex)] == [(0, 1, "raw", 0), (1, 0, "war", 1)]
    finally:
        del KINDS["address"]


def test_a_strided_row_view_maps_index_for_index():
    """Strides of a match_buffer are its parent's (TVM binds them): the row view still maps G[tx, i]."""
    KINDS["strided"] = (ROW_VIEW.replace("offset_factor=1", "strides=[1], offset_factor=1"), "outer", "Gv[i]")
    try:
        _, [(_, w0), _] = _regions("strided")
        assert _text(w0["G"]) == [[("tx", "1"), ("i", "1")]]
    finally:
        del KINDS["strided"]


def test_a_buffer_the_loop_versions_may_not_be_read_through_a_decl_buffer():
    """TVM versions a buffer allocated in the loop by rewriting its accesses; a decl_buffer over its data keeps
    addressing the first version (found: 336 wrong elements with stages (0, 2)), so the loop is refused."""
    text = ('@T.prim_func(s_tir=True)\n'
            'def main(A: T.Buffer((64, 8), "float32"), C: T.Buffer((64, 8), "float32")):\n'
            '    for i in T.serial(64):\n'
            '        with T.sblock("body"):\n'
            '            S = T.sblock_alloc_buffer((8,), "float32", scope="shared")\n'
            '            for j in range(8):\n'
            '                with T.sblock("load"):\n'
            '                    S[j] = A[i, j] * T.float32(2)\n'
            '            for j in range(8):\n'
            '                with T.sblock("use"):\n'
            '                    T.reads(S[0:8])\n'
            '                    T.writes(C[i, j])\n'
            '                    Sv = T.decl_buffer((8,), "float32", data=S.data, scope="shared")\n'
            '                    C[i, j] = Sv[j] + T.float32(1)\n')
    with pytest.raises(UnsupportedLoopError, match="buffer 'S' is allocated in the loop and accessed through "
                                                   "the view 'Sv'"):
        auto_pipeline(tvm.s_tir.Schedule(tir_gen.parse(text)), "i", "sm_80")


def test_an_undeclared_buffer_view_of_a_pointer_cannot_be_scheduled():
    """``T.Buffer(..., data=G.data)`` used without a declaration: TVM's schedule refuses the function (it is
    not well-formed), so no loop of it reaches the front-end (views.py relies on this)."""
    text = kernel("decl_buffer at function level").replace("T.decl_buffer((4, 72)", "T.Buffer((4, 72)")
    func = tvm.script.from_source(text, check_well_formed=False)
    with pytest.raises(Exception, match="without a prior DeclBuffer"):
        tvm.s_tir.Schedule(func)


@pytest.mark.parametrize("kind", ["match_buffer in a block around the loop", "decl_buffer at function level"])
def test_plan_module_and_metaschedule_see_the_hazard_too(kind):
    """The other entry points that re-plan an annotated loop (plan_module; MetaSchedule's TwillPipeline) go
    through the same front-end: the loop of the issue, annotated as a rule would (two stages), re-planned
    by each, computes on llvm what the loop computes unpipelined."""
    import tvm_twill
    from tvm_twill.integrations.metaschedule import TwillPipeline
    from tvm_twill.model.pipeline import PipelineAnnotation
    from tvm_twill.transforms import apply_annotation

    func = tir_gen.parse(kernel(kind))

    def annotated():
        sch = tvm.s_tir.Schedule(func)
        apply_annotation(sch, sch.get_loops(sch.get_sblock("body"))[-1], PipelineAnnotation((0, 1), (0, 1), ()))
        return sch

    mplan = tvm_twill.plan_module(annotated().mod, "sm_80", max_workers=1, quiet=True)
    assert _wrong(func, cpu_runnable(mplan.mod, "the planned module")) == 0
    sch = annotated()
    twill = TwillPipeline(cache=None)
    twill.target = tvm.target.Target({"kind": "cuda", "arch": "sm_80"})
    twill.apply(sch)
    (replan,) = twill.history
    assert replan.nests and all(n.plan is None or n.plan.extraction.hazards for n in replan.nests)
    assert _wrong(func, cpu_runnable(sch.mod, "the re-planned candidate")) == 0
