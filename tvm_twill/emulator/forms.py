"""The opcode forms (opcode with every dot modifier) the emulator has a handler for, spelled out.

``FORMS`` is what ``tvm_twill.emulator.handled_forms()`` returns; tests/emulator checks the frozen corpus
inventory against it.  Forms not listed raise ``EmulationError`` when a kernel is loaded.
"""
from __future__ import annotations

from itertools import product

INTS = ["u16", "s16", "u32", "s32", "u64", "s64"]
BITS = ["b16", "b32", "b64"]
FLOATS = ["f32", "f64"]
CMPS = ["eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs", "equ", "neu", "ltu", "leu", "gtu", "geu",
        "num", "nan"]
ROUND = ["rn", "rz", "rm", "rp"]
IROUND = ["rni", "rzi", "rmi", "rpi"]
ALL_T = INTS + BITS + ["u8", "s8", "b8", "f16", "bf16", "f32", "f64"]


def _forms():
    out = set()
    add = out.add
    for op, t in product(["add", "sub", "min", "max", "abs", "neg"], INTS + FLOATS + ["f16"]):
        add(f"{op}.{t}")
    for op, r, t in product(["add", "sub", "mul"], ROUND + ["ftz", "sat"], ["f32"]):
        add(f"{op}.{r}.{t}")
    add("add.sat.s32")
    for t in INTS:
        for m in ("lo", "hi"):
            add(f"mul.{m}.{t}")
            add(f"mad.{m}.{t}")
        add(f"div.{t}")
        add(f"rem.{t}")
    for t in ("u16", "s16", "u32", "s32"):
        add(f"mul.wide.{t}")
        add(f"mad.wide.{t}")
    for t in FLOATS + ["f16"]:
        add(f"mul.{t}")
    for r, t in product(ROUND, FLOATS):
        add(f"fma.{r}.{t}")
        add(f"mad.{r}.{t}")
        add(f"div.{r}.{t}")
    for m in ("approx", "full", "approx.ftz", "full.ftz"):
        add(f"div.{m}.f32")
    for op in ("rcp", "sqrt", "rsqrt", "ex2", "lg2", "sin", "cos", "tanh"):
        add(f"{op}.approx.f32")
        add(f"{op}.approx.ftz.f32")
    for op in ("rcp", "sqrt"):
        add(f"{op}.rn.f32")
        add(f"{op}.rn.f64")
    for op, t in product(["and", "or", "xor", "not", "cnot"], BITS + ["pred"]):
        add(f"{op}.{t}")
    for t in BITS:
        add(f"shl.{t}")
        add(f"shr.{t}")
    for t in INTS:
        add(f"shr.{t}")
    for op, t in product(["popc", "clz", "brev"], ["b32", "b64"]):
        add(f"{op}.{t}")
    for t in ("u32", "s32", "u64", "s64"):
        add(f"bfe.{t}")
    add("bfi.b32")
    add("bfi.b64")
    add("prmt.b32")
    add("lop3.b32")
    for c, t in product(CMPS, INTS + BITS + FLOATS + ["f16"]):
        add(f"setp.{c}.{t}")
        for b in ("and", "or", "xor"):
            add(f"setp.{c}.{b}.{t}")
    return frozenset(out) | _memory_and_sync_forms()


def _memory_and_sync_forms():
    out = set()
    add = out.add
    for t in INTS + BITS + FLOATS + ["f16"]:
        add(f"selp.{t}")
        add(f"mov.{t}")
    add("mov.pred")
    for d, s in product(ALL_T, ALL_T):
        add(f"cvt.{d}.{s}")
        add(f"cvt.sat.{d}.{s}")
        for r in ROUND + IROUND:
            add(f"cvt.{r}.{d}.{s}")
            add(f"cvt.{r}.sat.{d}.{s}")
            add(f"cvt.{r}.ftz.{d}.{s}")
    for sp, t in product(["shared", "global", "local"], ["u32", "u64"]):
        add(f"cvta.{sp}.{t}")
        add(f"cvta.to.{sp}.{t}")
    for op, sp, q, v, t in product(["ld", "st"], ["", ".global", ".shared", ".local", ".param", ".const"],
                                   ["", ".volatile", ".nc", ".relaxed.gpu", ".weak"], ["", ".v2", ".v4"],
                                   ALL_T):
        if op == "st" and (sp in (".param", ".const") or q == ".nc"):
            continue
        add(f"{op}{q if q == '.volatile' else ''}{sp}{q if q != '.volatile' else ''}{v}.{t}")
    for op, sp, o, t in product(["atom", "red"], ["", ".shared", ".global"],
                                ["add", "min", "max", "exch", "cas", "and", "or", "xor", "inc", "dec"],
                                ["u32", "s32", "u64", "s64", "f32", "f64", "b32", "b64"]):
        if op == "red" and o in ("exch", "cas"):
            continue
        add(f"{op}{sp}.{o}.{t}")
    for d in ("", ".tensor.1d", ".tensor.2d", ".tensor.3d", ".tensor.4d", ".tensor.5d"):
        add(f"cp.async.bulk{d}.shared::cluster.global.mbarrier::complete_tx::bytes")
        add(f"cp.async.bulk{d}.global.shared::cta.bulk_group")
        if d:
            add(f"cp.async.bulk{d}.global.shared::cta.tile.bulk_group")
            add(f"cp.async.bulk{d}.shared::cluster.global.tile.mbarrier::complete_tx::bytes")
    out |= {"cp.async.bulk.commit_group", "cp.async.bulk.wait_group", "cp.async.bulk.wait_group.read"}
    add("cvta.param.u64")
    out |= {"cp.async.ca.shared.global", "cp.async.cg.shared.global", "cp.async.commit_group",
            "cp.async.wait_group", "cp.async.wait_all", "cp.async.mbarrier.arrive.shared.b64",
            "cp.async.mbarrier.arrive.noinc.shared.b64"}
    for mb in ("init", "arrive", "arrive.expect_tx", "expect_tx", "complete_tx", "inval", "test_wait.parity",
               "try_wait.parity", "try_wait.parity.acquire.cta.shared::cta", "arrive_drop"):
        add(f"mbarrier.{mb}.shared.b64" if not mb.endswith("shared::cta") else f"mbarrier.{mb}.b64")
    out |= {"bar.red.popc.u32", "bar.red.and.pred", "bar.red.or.pred", "mbarrier.arrive.release.cta.shared::cta.b64",
            "mbarrier.arrive.relaxed.cta.shared::cta.b64", "mbarrier.try_wait.parity.relaxed.cta.shared::cta.b64"}
    out |= {"bar.sync", "bar.arrive", "barrier.sync", "barrier.sync.aligned", "barrier.arrive",
            "barrier.arrive.aligned", "bar.warp.sync", "membar.cta", "membar.gl", "membar.sys", "fence.sc.cta",
            "fence.acq_rel.cta", "fence.acq_rel.gpu", "fence.proxy.async", "fence.proxy.async.shared::cta",
            "fence.proxy.async.global", "fence.mbarrier_init.release.cluster", "activemask.b32", "elect.sync",
            "bra", "bra.uni", "ret", "exit", "trap"}
    for m in ("idx", "up", "down", "bfly"):
        add(f"shfl.sync.{m}.b32")
    for m, t in (("all", "pred"), ("any", "pred"), ("uni", "pred"), ("ballot", "b32")):
        add(f"vote.sync.{m}.{t}")
    for x, tr, sp in product(["x1", "x2", "x4"], ["", ".trans"], ["shared", "shared::cta"]):
        add(f"ldmatrix.sync.aligned.m8n8.{x}{tr}.{sp}.b16")
    for nn, t in product(range(8, 257, 8), ["f16", "bf16"]):
        add(f"wgmma.mma_async.sync.aligned.m64n{nn}k16.f32.{t}.{t}")
    out |= {"wgmma.fence.sync.aligned", "wgmma.commit_group.sync.aligned", "wgmma.wait_group.sync.aligned",
            "setmaxnreg.inc.sync.aligned.u32", "setmaxnreg.dec.sync.aligned.u32"}
    for lay, sp in product(["row", "col"], ["", ".shared", ".global"]):
        add(f"wmma.load.a.sync.aligned.{lay}.m16n16k16{sp}.f16")
        add(f"wmma.load.b.sync.aligned.{lay}.m16n16k16{sp}.f16")
        for t in ("f16", "f32"):
            add(f"wmma.load.c.sync.aligned.{lay}.m16n16k16{sp}.{t}")
            add(f"wmma.store.d.sync.aligned.{lay}.m16n16k16{sp}.{t}")
    for la, lb, d, c in product(["row", "col"], ["row", "col"], ["f16", "f32"], ["f16", "f32"]):
        add(f"wmma.mma.sync.aligned.{la}.{lb}.m16n16k16.{d}.{c}")
    for k, t in product(["k16", "k8"], ["f16", "bf16"]):
        add(f"mma.sync.aligned.m16n8{k}.row.col.f32.{t}.{t}.f32")
    return frozenset(out) | _foreign_forms()


def _memory_model_forms():
    """The memory model (memmodel): sem and scope on ld / st / atom / red, and the ordering fences."""
    out = set()
    add = out.add
    for op, sem, sc, sp, v, t in product(["ld", "st"], ["relaxed", "acquire", "release"],
                                         ["cta", "cluster", "gpu", "sys"], ["", ".global", ".shared"],
                                         ["", ".v2", ".v4"], ALL_T):
        if (op, sem) not in (("ld", "release"), ("st", "acquire")):
            add(f"{op}.{sem}.{sc}{sp}{v}.{t}")
    for op, sem, sc, sp, o, t in product(["atom", "red"], ["", ".relaxed", ".acquire", ".release", ".acq_rel"],
                                         ["", ".cta", ".cluster", ".gpu", ".sys"], ["", ".shared", ".global"],
                                         ["add", "min", "max", "exch", "cas", "and", "or", "xor", "inc", "dec"],
                                         ["u32", "s32", "u64", "s64", "f32", "f64", "b32", "b64"]):
        if (sem or sc) and not (op == "red" and (o in ("exch", "cas") or sem in (".acquire", ".acq_rel"))):
            add(f"{op}{sem}{sc}{sp}.{o}.{t}")
    for sc in ("cta", "cluster", "gpu", "sys"):
        out |= {f"fence.sc.{sc}", f"fence.acq_rel.{sc}", f"fence.acquire.{sc}", f"fence.release.{sc}", f"fence.{sc}"}
    return frozenset(out)


def _foreign_forms():
    """Forms other compilers (Triton, CuTe) emit: mma.sync shapes and types, stmatrix, hint-only
    instructions.  Cache / eviction hint qualifiers and qualifier order are normalized by the parser
    (``qualifiers``), so they do not make forms of their own."""
    out = set()
    add = out.add
    for k in ("k16", "k8"):
        add(f"mma.sync.aligned.m16n8{k}.row.col.f16.f16.f16.f16")
    add("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32")
    for k, a, b, s in product(["k16", "k32"], ["s8", "u8"], ["s8", "u8"], ["", ".satfinite"]):
        add(f"mma.sync.aligned.m16n8{k}.row.col{s}.s32.{a}.{b}.s32")
    for a, b in product(["e4m3", "e5m2"], ["e4m3", "e5m2"]):
        add(f"mma.sync.aligned.m16n8k32.row.col.f32.{a}.{b}.f32")
    for x, tr, sp in product(["x1", "x2", "x4"], ["", ".trans"], ["shared", "shared::cta"]):
        add(f"stmatrix.sync.aligned.m8n8.{x}{tr}.{sp}.b16")
    for sp, lv in product(["", ".global", ".local"], ["L1", "L2"]):
        add(f"prefetch{sp}.{lv}")
    out |= {"prefetch.global.L2::evict_last", "prefetch.global.L2::evict_normal", "prefetchu.L1",
            "prefetch.tensormap", "prefetch.const.tensormap", "prefetch.param.tensormap",
            "nanosleep.u32", "griddepcontrol.launch_dependents", "griddepcontrol.wait", "createpolicy.cvt.L2.b64"}
    pri = ["L2::evict_last", "L2::evict_normal", "L2::evict_first", "L2::evict_unchanged"]
    for kind, p1, p2 in product(["fractional", "range", "range.global"], pri, ["", ".L2::evict_first",
                                                                              ".L2::evict_unchanged"]):
        add(f"createpolicy.{kind}.{p1}{p2}.b64")
    return out


def _arith_forms():
    """Float arithmetic and conversions with every modifier combination the ISA allows (fparith, convert)."""
    out = set()
    add = out.add
    opt32 = ["", ".ftz", ".sat", ".ftz.sat"]
    for op, r, o in product(["add", "sub", "mul", "fma", "mad"], [""] + [f".{m}" for m in ROUND], opt32):
        if op in ("fma", "mad") and not r:
            continue
        add(f"{op}{r}{o}.f32")
    for op, r in product(["add", "sub", "mul", "div", "rcp", "sqrt"], ROUND):
        add(f"{op}.{r}.f64")
        add(f"{op}.{r}.f32")
        add(f"{op}.{r}.ftz.f32")
    for op, o in product(["min", "max", "abs", "neg"], ["", ".ftz"]):
        add(f"{op}{o}.f32")
    for op, o in product(["min", "max"], [".NaN", ".ftz.NaN"]):
        add(f"{op}{o}.f32")
    for t in ("f16", "f16x2"):
        for op, r, o in product(["add", "sub", "mul", "fma"], ["", ".rn"], ["", ".ftz", ".sat", ".ftz.sat"]):
            add(f"{op}{r}{o}.{t}")
        out |= {f"fma.rn.relu.{t}", f"fma.rn.ftz.relu.{t}", f"neg.ftz.{t}", f"abs.ftz.{t}"}
        for op, o in product(["min", "max"], ["", ".ftz", ".NaN", ".ftz.NaN"]):
            add(f"{op}{o}.{t}")
    for t in ("bf16", "bf16x2"):
        for op, r in product(["add", "sub", "mul", "fma"], ["", ".rn"]):
            add(f"{op}{r}.{t}")
        out |= {f"fma.rn.relu.{t}", f"neg.{t}", f"abs.{t}", f"min.{t}", f"max.{t}", f"min.NaN.{t}",
                f"max.NaN.{t}"}
    for t in ("f16x2", "f16"):
        out |= {f"neg.{t}", f"abs.{t}"}
    for d, r, relu, sat in product(["f16x2", "bf16x2", "f16", "bf16"], ["rn", "rz"], ["", ".relu"],
                                   ["", ".satfinite"]):
        add(f"cvt.{r}{relu}{sat}.{d}.f32")
        add(f"cvt.{r}{sat}{relu}.{d}.f32")
    for d, relu in product(["e4m3x2", "e5m2x2"], ["", ".relu"]):
        add(f"cvt.rn.satfinite{relu}.{d}.f32")
        add(f"cvt.rn{relu}.f16x2.{d}")
    return out


FORMS = _forms() | _arith_forms() | _memory_model_forms()
