"""tvm_twill.emulator.launch: the launches a compiled module's host code performs, read by running that host
code on the CPU, against what the lowered IR says (thread extents and dynamic shared memory of each device
function, evaluated for the arguments' shapes), for kernels TVM builds."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

from tvm.script import tirx as T  # noqa: E402

from tvm_twill.emulator import launch as L  # noqa: E402
from tvm_twill.errors import InputError, ToolchainError  # noqa: E402

HERE = Path(__file__).resolve().parent


def _corpus():
    spec = importlib.util.spec_from_file_location("make_corpus", HERE / "make_corpus.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _compile(mod, arch, pipeline="default"):
    with tvm.transform.PassContext(config={"tirx.use_async_copy": 1}):
        return tvm.compile(mod, target=tvm.target.Target({"kind": "cuda", "arch": arch}), tir_pipeline=pipeline)


def _ir_launches(mod, arch, pipeline, env):
    """{kernel: (grid, block, dyn_smem)} from the lowered IRModule: each device function's thread_extent
    attributes and shared.dyn allocations, with its scalar parameters bound by name from ``env``."""
    from tvm_twill.frontend.ir import substitute, tir_pipeline_registry, tirx, tvm_ffi

    tgt = tvm.target.Target({"kind": "cuda", "arch": arch})
    mod = tirx.transform.BindTarget(tgt.with_host(tvm.target.Target("llvm")))(mod)
    passes = (tirx.get_default_tir_pipeline(tgt) if pipeline == "default"
              else tir_pipeline_registry().PIPELINE_MAP[pipeline]())[0]
    with tvm.transform.PassContext(config={"tirx.use_async_copy": 1}):
        mod = passes(mod)
    out = {}
    for gv, func in mod.functions_items():
        if not isinstance(func, tirx.PrimFunc) or "tirx.kernel_launch_params" not in (func.attrs or {}):
            continue
        bind = [(p, tirx.const(env[p.name], str(p.ty))) for p in func.params if p.name in env]
        ext, smem = {}, [0]

        def value(e, bind=bind):
            return int(tvm.sym.Analyzer().simplify(substitute(e, bind)))

        def on_attr(a, ext=ext, value=value):
            if a.attr_key == "thread_extent":
                ext[a.node.thread_tag] = value(a.value)

        def on_alloc(a, smem=smem, value=value):
            if a.buffer.scope() == "shared.dyn":
                smem[0] += int(np.prod([value(d) for d in a.buffer.shape])) * tvm.DataType(a.buffer.dtype).bits // 8

        tvm_ffi.structural_walk(func.body, [(tirx.AttrStmt, on_attr), (tirx.AllocBuffer, on_alloc)])
        out[gv.name_hint] = (tuple(ext.get(f"blockIdx.{d}", 1) for d in "xyz"),
                             tuple(ext.get(f"threadIdx.{d}", 1) for d in "xyz"), smem[0])
    return out


@T.prim_func
def _scale(a: T.handle, b: T.handle, n: T.int32, alpha: T.float32):
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for bx in T.thread_binding((n + 127) // 128, thread="blockIdx.x"):
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            if bx * 128 + tx < n:
                B[bx * 128 + tx] = A[bx * 128 + tx] * alpha


@T.prim_func
def _two_kernels(a: T.handle, b: T.handle, c: T.handle, n: T.int32):
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    C = T.match_buffer(c, (64, 64), "float32")
    for bx in T.thread_binding((n + 255) // 256, thread="blockIdx.x"):
        for tx in T.thread_binding(256, thread="threadIdx.x"):
            if bx * 256 + tx < n:
                B[bx * 256 + tx] = A[bx * 256 + tx] + T.float32(1)
    for by in T.thread_binding(64, thread="blockIdx.y"):
        for ty in T.thread_binding(64, thread="threadIdx.y"):
            C[by, ty] = B[by * 64 + ty]


@pytest.fixture(scope="module")
def corpus():
    return _corpus()


def _ptx_kind(param) -> str:
    """The PTX declaration type a Param must have: pointers are .u64, tensor maps 128 aligned bytes, scalars
    their own width (nvcc declares signed integers as .u)."""
    if param[0] == "buffer":
        return ".u64"
    if param[0] == "tensormap":
        return ".align 128 .b8"
    return "." + param[1].replace("s", "u")


def _check(f, mod, arch, pipeline, args, env, target=None):
    ptx, got = L.launches(f, args, target=target or {"kind": "cuda", "arch": arch})
    want = _ir_launches(mod, arch, pipeline, env)
    assert [lc.kernel for lc in got] == list(want)
    for lc in got:
        assert (lc.grid, lc.block, lc.dyn_smem) == want[lc.kernel], lc
        assert f".entry {lc.kernel}(" in ptx
        decls = re.findall(rf"^\s*\.param (\.align 128 \.b8|\.[usfb]\d+)[^\n]*\b{lc.kernel}_param_\d+", ptx,
                           re.MULTILINE)
        assert [_ptx_kind(p) for p in lc.params] == decls  # one Param per PTX parameter, in order, of its type
    return got


def test_symbolic_shape_kernel_with_int_and_float_arguments():
    mod = tvm.IRModule({"main": _scale})
    f = _compile(mod, "sm_80")
    a, b = np.zeros(300, "float32"), np.zeros(300, "float32")
    (lc,) = _check(f, mod, "sm_80", "default", [a, b, 300, 2.0], {"n": 300})
    assert lc.grid == (3, 1, 1) and lc.block == (128, 1, 1) and lc.dyn_smem == 0
    assert lc.params[:2] == (("buffer", 0, 0), ("buffer", 1, 0))
    assert ("scalar", "s32", 300) in lc.params and ("scalar", "f32", 2.0) in lc.params
    (lc,) = L.launches(f, [np.zeros(1000, "float32"), np.zeros(1000, "float32"), 1000, 1.0])[1]
    assert lc.grid == (8, 1, 1)  # recomputed from the arguments


def test_kernels_are_listed_in_host_call_order():
    mod = tvm.IRModule({"main": _two_kernels})
    f = _compile(mod, "sm_80")
    args = [np.zeros(5000, "float32"), np.zeros(5000, "float32"), np.zeros((64, 64), "float32"), 5000]
    first, second = _check(f, mod, "sm_80", "default", args, {"n": 5000})
    assert (first.grid, first.block) == ((20, 1, 1), (256, 1, 1))
    assert (second.grid, second.block) == ((1, 64, 1), (1, 64, 1))
    assert ("buffer", 1, 0) in first.params and ("buffer", 1, 0) in second.params


def test_swp_gemm_with_dynamic_shared_memory(corpus):
    mod, arch, pipeline = corpus.KERNELS["swp_sm80"]()
    f = _compile(mod, arch, pipeline)
    args = [np.zeros((256, 256), "float16"), np.zeros((256, 256), "float16"), np.zeros((256, 256), "float32")]
    (lc,) = _check(f, mod, arch, pipeline, args, {})
    assert lc.dyn_smem > 48 * 1024 and lc.params == (("buffer", 0, 0), ("buffer", 1, 0), ("buffer", 2, 0))


def test_dlight_matmul_with_a_symbolic_m(corpus):
    mod, arch, pipeline = corpus.KERNELS["dlight_matmul_dynamic"]()
    f = _compile(mod, arch, pipeline)
    for m in (100, 300):
        args = [np.zeros((m, 256), "float16"), np.zeros((256, 256), "float16"), np.zeros((m, 256), "float32")]
        (lc,) = _check(f, mod, arch, pipeline, args, {"m": m})
        assert lc.params[-1] == ("scalar", "s64", m)


def test_dlight_softmax_and_rms_norm(corpus):
    for name in ("dlight_softmax", "dlight_rms_norm"):
        mod, arch, pipeline = corpus.KERNELS[name]()
        f = _compile(mod, arch, pipeline)
        shapes = {"dlight_softmax": [(32, 256), (32, 256)], "dlight_rms_norm": [(32, 256), (256,), (32, 256)]}[name]
        dtype = "float32" if name == "dlight_softmax" else "float16"
        _check(f, mod, arch, pipeline, [np.zeros(s, dtype) for s in shapes], {})


def test_tma_kernel_records_the_tensor_map_encodes(corpus):
    mod, arch, pipeline = corpus.KERNELS["wgmma_ws_sm90a"]()
    f = _compile(mod, arch, pipeline)
    args = [np.zeros((256, 256), "float16"), np.zeros((256, 256), "float16"), np.zeros((256, 256), "float32")]
    (lc,) = _check(f, mod, arch, pipeline, args, {})
    maps = [p[1] for p in lc.params if p[0] == "tensormap"]
    assert [m.buffer for m in maps] == [(0, 0), (1, 0)] and lc.params[2] == ("buffer", 2, 0)
    for m in maps:  # a 256 x 256 fp16 row-major tensor, 128-byte swizzled boxes of 64 fp16 (128 B) rows
        assert (m.dtype, m.rank, m.dims, m.strides, m.swizzle) == ("float16", 2, (256, 256), (512,), 3)
        assert m.box[0] == 64 and m.element_strides == (1, 1)
    assert ".entry main_kernel(" in L.launches(f, args)[0]  # without target=: sm_90a, from the source's wgmma


def test_target_arch_without_target_is_the_lowest_the_source_needs(corpus):
    archs = {}
    for name, build in corpus.KERNELS.items():
        if name.startswith(("swp", "ws", "wgmma")):
            archs[name] = L.target_arch((HERE / "corpus" / f"{name}.cu").read_text())
    assert {n for n, a in archs.items() if a == "sm_90a"} == {n for n in archs if "sm90a" in n or "sm100a" in n}
    assert L.target_arch("", {"kind": "cuda", "arch": "sm_86"}) == "sm_86"
    with pytest.raises(InputError, match="a CUDA target with an arch"):
        L.target_arch("", "llvm")


@pytest.mark.parametrize("swizzle", [True, False])
def test_recorded_tensor_maps_are_the_ones_the_transform_emitted(swizzle):
    """The encodes the host code performs, as recorded, equal the tensor maps tvm_twill's TMA transform says
    it emitted (the 128-byte swizzled 2-D boxes, and the unswizzled 3-D boxes of 16-byte rows)."""
    import tvm_twill
    from tvm_twill.model.pipeline import WS_SWIZZLE
    from tvm_twill.workloads import wgmma_gemm

    sch, k0, _ = wgmma_gemm(256)
    if not swizzle:
        sch.annotate(k0, WS_SWIZZLE, 0)
    plan = tvm_twill.auto_pipeline(sch, k0, "sm_90a", warp_specialize=True)
    f = _compile(sch.mod, "sm_90a", plan.tir_pipeline)
    args = [np.zeros((256, 256), "float16"), np.zeros((256, 256), "float16"), np.zeros((256, 256), "float32")]
    (lc,) = L.launches(f, args, target={"kind": "cuda", "arch": "sm_90a"})[1]
    got = [p[1] for p in lc.params if p[0] == "tensormap"]
    want = plan.warp_specialization.facts.tensor_maps
    assert len(got) == len(want) == 2
    for g, w in zip(got, want):
        assert g.buffer == ("AB".index(w.buffer), 0)
        assert (g.dtype, g.dims, g.strides, g.box, g.swizzle) == (w.dtype, w.global_dims, w.global_strides, w.box,
                                                                  w.swizzle)
        assert g.element_strides == (1,) * g.rank and (g.interleave, g.oob_fill) == (0, 0)


def test_bad_arguments_are_refused_in_one_line():
    mod = tvm.IRModule({"main": _scale})
    f = _compile(mod, "sm_80")
    a = np.zeros(300, "float32")
    with pytest.raises(InputError, match=r"the host code refused the arguments: .*n"):
        L.launches(f, [a, np.zeros(200, "float32"), 300, 1.0])
    with pytest.raises(InputError, match=r"argument 2 is a str: pass numpy arrays, ints \(symbolic shapes\)"):
        L.launches(f, [a, a, "300", 1.0])
    with pytest.raises(InputError, match="argument 1 is not a C-contiguous array"):
        L.launches(f, [a, np.zeros(600, "float32")[::2], 300, 1.0])
    with pytest.raises(InputError, match="mod= is not needed"):
        L.launches(f, [a, a, 300, 1.0], mod=mod)
    from tvm import te

    x = te.placeholder((8,), "float32", name="x")
    cpu = tvm.compile(te.create_prim_func([x, te.compute((8,), lambda i: x[i] + 1, name="y")]), target="llvm")
    with pytest.raises(InputError, match="expected what tvm.compile returns for a CUDA target"):
        L.launches(cpu, [np.zeros(8, "float32"), np.zeros(8, "float32")])


def test_compile_ptx_caches_by_content(tmp_path, monkeypatch):
    monkeypatch.setenv("TVM_TWILL_CACHE", str(tmp_path))
    src = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] += 1.0f; }\n'
    ptx = L.compile_ptx(src, "sm_80")
    assert ".entry k(" in ptx and ".target sm_80" in ptx
    assert re.search(r'\.file\s+1 "kernel\.cu"', ptx)  # no temporary folder in the PTX
    (cached,) = (tmp_path / "ptx").iterdir()
    cached.write_text(ptx + "// from the cache\n")
    assert L.compile_ptx(src, "sm_80").endswith("// from the cache\n")
    assert ".target sm_90a" in L.compile_ptx(src, "sm_90a")  # another arch, another entry
    with pytest.raises(ToolchainError, match="nvcc -ptx -arch=sm_80 failed: .*error"):
        L.compile_ptx(src.replace("1.0f;", "1.0f"), "sm_80")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(L, "_NVCC_FALLBACKS", ())
    with pytest.raises(ToolchainError, match="nvcc not found: install the CUDA toolkit"):
        L.compile_ptx(src + " ", "sm_80")
