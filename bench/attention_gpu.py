"""The attention kernels of the GPU suite: compiled here with TVM, run on a GPU by bench/gpu_attention_run.py.

``export(dir, arch)`` (``gpu_suite.py prepare``) builds FlashAttention forward (fp16, ``HEADS`` heads x
``Q_LEN`` queries, the KV length ``n`` a symbolic scalar argument) at head dim 64 and 128, causal and not,
as these variants (``variant_specs``):

* ``simt_plain``: ``tvm_twill.kernels.fa_forward`` (CUDA cores) unpipelined: the baseline of the next two;
* ``simt_swp``: the same, software-pipelined by ``auto_pipeline`` (its FMA loops make it ALU-bound on
  the model, which then keeps the loads synchronous: no cp.async stage);
* ``simt_ws``: the same, ``auto_pipeline(..., warp_specialize=True)`` (producer warp, mbarrier rings);
* on sm_80 only (its mma.sync code runs on Hopper too): ``tc_plain``, ``kernels.attention_tc.fa_forward_tc``
  (tensor cores) unpipelined, and ``tc_swp``, pipelined by ``auto_pipeline`` (both under ``TC_PASS_CONFIG``);
* on sm_90a only: ``wgmma_plain``, ``kernels.attention_wgmma.fa_forward_wgmma`` (both GEMMs on wgmma, 128
  query rows per CTA in two warp groups, 32 keys per tile) unpipelined, and ``wgmma_ws``, warp-specialized
  by ``auto_pipeline(..., warp_specialize=True)``: FA3's two consumer warp groups taking the look-ahead turn
  (both under ``WGMMA_PASS_CONFIG``).

It writes ``dir/manifest.json`` and one ``.cu`` per variant.  The manifest carries per variant the kernel's
name, grid, block, dynamic shared memory and parameters in PTX order (``{"kind": "buffer", "arg": "Q"}``,
``{"kind": "scalar", "type": "s32", "value": "n"}``: read from the launches TVM's host code makes for two KV
lengths, so a scalar that follows ``n`` is recorded as ``"n"``), the unpipelined variant it is timed against
(``baseline``) and the model's prediction (``plan.prediction()`` with ptxas's register count when nvcc is
here), and the KV lengths every variant is checked at (``CASES``: a multiple of the tile and a ragged length,
both timed on the GPU; fewer tiles than the pipeline has stages; no key at all).

``emulate(dir)`` (``gpu_suite.py emulate``) runs each variant on the CPU PTX emulator instead (a few CTAs, a
short ragged KV length: the kernels are the same for every ``n``) against ``attention_reference``.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from common import git_commit  # noqa: E402
from predicted import ptxas_registers, record, serial  # noqa: E402

HEADS, Q_LEN = 16, 2048
#: KV lengths each variant is checked at on the GPU (``timed``: also measured).
CASES = ({"n": 2048, "timed": True}, {"n": 2021, "timed": True}, {"n": 5, "timed": False}, {"n": 0, "timed": False})
#: Kernel argument order of ``fa_forward`` / ``fa_forward_tc``: (Q, K, V, O).
ARGS = ("Q", "K", "V", "O")
#: Variants per arch: (family, pipelining); every one at head dim 64 and 128, causal and not.
KINDS = {"sm_80": (("simt", "plain"), ("simt", "swp"), ("simt", "ws"), ("tc", "plain"), ("tc", "swp")),
         "sm_90a": (("simt", "plain"), ("simt", "swp"), ("simt", "ws"), ("wgmma", "plain"), ("wgmma", "ws"))}
#: The wgmma kernel's tile: two consumer warp groups of 64 query rows, 32 keys per KV tile.
WGMMA_TILE = {"block_m": 128, "block_n": 32}


def variant_name(family: str, pipelining: str, d: int, causal: bool) -> str:
    return f"{family}_{pipelining}_d{d}" + ("_causal" if causal else "")


def variant_specs(arch: str) -> list[dict]:
    """The attention variants of ``arch`` (``KINDS``), each with the unpipelined kernel it is timed against."""
    out = []
    for d in (64, 128):
        for causal in (False, True):
            for family, pipelining in KINDS[arch]:
                out.append({"name": variant_name(family, pipelining, d, causal), "family": family,
                            "pipelining": pipelining, "head_dim": d, "causal": causal,
                            "baseline": None if pipelining == "plain" else variant_name(family, "plain", d, causal)})
    return out


def build(spec: dict, arch: str, heads: int, q_len: int, time_limit: float):
    """(shape, compiled module, plan or None, schedule) of one variant."""
    import tvm

    import tvm_twill
    from tvm_twill.kernels import KV_LOOP, AttentionShape, fa_forward, fa_forward_tc, fa_forward_wgmma
    from tvm_twill.kernels.attention_tc import TC_PASS_CONFIG
    from tvm_twill.kernels.attention_wgmma import WGMMA_PASS_CONFIG

    family = spec["family"]
    shape = AttentionShape(head_dim=spec["head_dim"], causal=spec["causal"], heads=heads, q_len=q_len,
                           **(WGMMA_TILE if family == "wgmma" else {}))
    make = {"tc": fa_forward_tc, "wgmma": fa_forward_wgmma}.get(family, fa_forward)
    config = {"tc": TC_PASS_CONFIG, "wgmma": WGMMA_PASS_CONFIG}.get(family, {})
    sch = tvm.s_tir.Schedule(make(shape))
    plan = None
    if spec["pipelining"] != "plain":   # the wgmma kernel is planned under its config (its WS plan emits it)
        with tvm.transform.PassContext(config=config if family == "wgmma" else {}):
            plan = tvm_twill.auto_pipeline(sch, KV_LOOP, arch, time_limit=time_limit,
                                           warp_specialize=spec["pipelining"] == "ws")
    with tvm.transform.PassContext(config=config):
        f = tvm_twill.build(sch.mod, arch, plan) if plan is not None else tvm_twill.build(sch.mod, arch)
    return shape, f, plan, sch


def launch_record(f, shape) -> dict:
    """Kernel name, grid, block, dynamic shared memory and parameters of ``f``'s one launch, read from what its
    host code launches for two KV lengths: a scalar equal to ``n`` in both is recorded as ``"n"``."""
    import numpy as np

    from tvm_twill.emulator.launch import launches

    seen = []
    for n in (37, 101):
        q = np.zeros((shape.heads, shape.q_len, shape.head_dim), np.float16)
        kv = np.zeros((shape.heads, n, shape.head_dim), np.float16)
        _, ls = launches(f, [q, kv, kv.copy(), q.copy()])
        if len(ls) != 1:
            raise RuntimeError(f"expected one kernel launch, the host code makes {len(ls)}")
        seen.append((n, ls[0]))
    (n0, a), (n1, b) = seen
    if (a.kernel, a.grid, a.block, a.dyn_smem) != (b.kernel, b.grid, b.block, b.dyn_smem):
        raise RuntimeError("the launch shape depends on the KV length: the manifest cannot record it")
    params = []
    for pa, pb in zip(a.params, b.params):
        if pa[0] == "buffer":
            params.append({"kind": "buffer", "arg": ARGS[pa[1]], "offset": pa[2]})
        elif pa[0] == "scalar" and (pa[2], pb[2]) == (n0, n1):
            params.append({"kind": "scalar", "type": pa[1], "value": "n"})
        elif pa[0] == "scalar" and pa[2] == pb[2]:
            params.append({"kind": "scalar", "type": pa[1], "value": pa[2]})
        else:
            raise RuntimeError(f"kernel parameter {pa} is neither a buffer, n nor a constant")
    return {"kernel": a.kernel, "grid": list(a.grid), "block": list(a.block), "dyn_smem": a.dyn_smem,
            "params": params}


def export(out: Path, arch: str, time_limit: float, *, heads: int = HEADS, q_len: int = Q_LEN,
           cases=CASES, only=None) -> int:
    """Compile the attention variants of ``arch`` (of ``only``, if given) and write ``out/manifest.json``."""
    out.mkdir(parents=True, exist_ok=True)
    man = {"kind": "attention", "arch": arch, "heads": heads, "q_len": q_len, "dtype": "float16",
           "args": list(ARGS), "conventions": "unscaled scores (scale=1), top-left causal mask, zeros for a row "
           "that sees no key", "cases": [dict(c) for c in cases], "commit": git_commit(),
           "command": " ".join([sys.executable, *sys.argv]), "variants": []}
    for spec in variant_specs(arch):
        if only and spec["name"] not in only:
            continue
        shape, f, plan, sch = build(spec, arch, heads, q_len, time_limit)
        src = f.mod.imports[0].inspect_source()
        (out / f"{spec['name']}.cu").write_text(src)
        regs = ptxas_registers(src, arch)
        v = {**spec, "cu": f"{spec['name']}.cu", "block_n": shape.block_n, "block_m": shape.block_m,
             **launch_record(f, shape), "annotation": plan.annotations if plan is not None else {},
             "prediction": record(plan if plan is not None else serial(sch, sch.get_loops(sch.get_sblock("kv"))[-1],
                                                                         arch), regs,
                                 tensor_cores=spec["family"] == "tc")}
        man["variants"].append(v)
        p = v["prediction"]
        print(f"{arch} {spec['name']:24s} grid {v['grid']} block {v['block']} smem {v['dyn_smem']:6d} B  "
              f"regs {regs}  predicted {p['tflops']} TFLOPS ({p['bound']}, {p['machine']})", flush=True)
        if p.get("note"):
            print(f"    {p['note']}")
        (out / "manifest.json").write_text(json.dumps(man, indent=2) + "\n")
    (out / "manifest.json").write_text(json.dumps(man, indent=2) + "\n")
    return 0


def emulate_variant(kdir: Path, man: dict, v: dict, n: int, blocks, seed: int, interleavings: int) -> dict:
    """One prepared attention kernel on the emulator for KV length ``n``: its CTAs ``blocks`` on seeded inputs,
    the rows they wrote against ``attention_reference``; every finding reported."""
    import numpy as np

    from tvm_twill import emulator
    from tvm_twill.emulator import Launch
    from tvm_twill.emulator.launch import compile_ptx
    from tvm_twill.kernels import attention_reference

    heads, q_len, d = man["heads"], man["q_len"], v["head_dim"]
    rng = np.random.default_rng(seed)
    q = (rng.standard_normal((heads, q_len, d)) * d ** -0.5).astype(np.float16)
    k = rng.standard_normal((heads, n, d)).astype(np.float16)
    vv = rng.standard_normal((heads, n, d)).astype(np.float16)
    o = np.full((heads, q_len, d), np.nan, np.float16)
    arrays = {"Q": q, "K": k, "V": vv, "O": o}
    index = {name: i for i, name in enumerate(ARGS)}
    params = tuple(("buffer", index[p["arg"]], p.get("offset", 0)) if p["kind"] == "buffer" else
                   ("scalar", p["type"], n if p["value"] == "n" else p["value"]) for p in v["params"])
    launch = Launch(v["kernel"], tuple((v["grid"] + [1, 1])[:3]), tuple((v["block"] + [1, 1])[:3]),
                    v.get("dyn_smem", 0), params)
    ptx = compile_ptx((kdir / v["cu"]).read_text(), man["arch"])
    report = emulator.run_ptx(ptx, [launch], *[arrays[a] for a in ARGS], seed=seed, interleavings=interleavings,
                              blocks=blocks)
    want = attention_reference(q, k, vv, v["causal"])
    bm = v["block_m"]
    rows = [(b[1], slice(b[0] * bm, (b[0] + 1) * bm)) for b in blocks]  # CTA (x, y) = (query block, head)
    err = float(np.max([np.abs(o[h, r].astype(np.float32) - want[h, r]).max() for h, r in rows]))  # NaN: unwritten
    correct = bool(err < 2e-2)
    return {"variant": v["name"], "n": n, "status": "ok" if correct and report.ok else "wrong", "correct": correct,
            "findings": [str(x) for x in report.findings], "max_abs_err": err, "blocks": [list(b) for b in blocks],
            "seed": seed, "interleavings": interleavings, "instructions": report.instructions,
            "seconds": round(report.seconds, 2), "prediction": v.get("prediction")}
