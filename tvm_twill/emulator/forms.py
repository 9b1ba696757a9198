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
    return frozenset(out)


FORMS = _forms()
