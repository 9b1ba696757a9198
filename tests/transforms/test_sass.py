"""tvm_twill.compiler.sass: the role dispatch of a warp-specialized kernel in its SASS.

The parser tests run on excerpts written by hand from real ``cuobjdump -sass`` output of the WS GEMM
(nvcc 13.0, cuobjdump 13.5; addresses renumbered so the excerpts are closed); the end-to-end test needs
TVM, nvcc and cuobjdump (``pip install 'tvm-twill[sass]'``) and is skipped without them.
"""
import re
import shutil
import subprocess

import pytest

from tvm_twill.compiler import sass as S

# sm_90a, emitted kernel: warp index ws_warp = __shfl_sync(..., threadIdx.y, 0, 32); `if (lin == 0)` init;
# `if (4 <= ws_warp) { setmaxnreg.dec; if (ws_warp == 4) producer } else { setmaxnreg.inc; consumer }`;
# one elect.sync (expect_tx) and one per-lane cp.async.bulk (ptxas's BRA.U.ANY loop)
SM90 = """
\tcode for sm_90a
\t.target\tsm_90a

\t\tFunction : main_kernel
\t.headerflags\t@"EF_CUDA_ACCELERATORS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                                  /* 0x00000a00ff017b82 */
                                                                                           /* 0x000fe20000000800 */
        /*0010*/                   S2R R3, SR_TID.Y ;                                      /* 0x0000000000037919 */
                                                                                           /* 0x000e2e0000002200 */
        /*0020*/                   S2R R0, SR_TID.X ;                                      /* 0x0000000000007919 */
        /*0030*/                   IMAD.SHL.U32 R2, R3, 0x20, RZ ;                         /* 0x0000002003027824 */
        /*0040*/                   SHFL.IDX PT, R3, R3, RZ, 0x1f ;                         /* 0x00001fff03037589 */
        /*0050*/                   IMAD.MOV R9, RZ, RZ, -R0 ;                              /* 0x000000ffff097224 */
        /*0060*/                   ISETP.NE.AND P0, PT, R2, R9, PT ;                       /* 0x000000090200720c */
        /*0070*/               @P0 BRA 0x90 ;                                              /* 0x0000000000640947 */
        /*0080*/                   SYNCS.EXCH.64 URZ, [UR10], UR4 ;                        /* 0x0000000000000000 */
        /*0090*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;                           /* 0x0000000000000000 */
        /*00a0*/                   ISETP.GT.AND P0, PT, R3, 0x3, PT ;                      /* 0x0000000000000000 */
        /*00b0*/               @P0 BRA 0x120 ;                                             /* 0x0000000000000000 */
        /*00c0*/                   NOP ;                                                   /* 0x0000000000000000 */
        /*00d0*/                   USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xf0 ;                /* 0x0000000000000000 */
        /*00e0*/                   PLOP3.LUT P0, PT, PT, PT, UP0, 0x80, 0x0 ;              /* 0x0000000000000000 */
        /*00f0*/              @!P0 BRA 0xc0 ;                                              /* 0x0000000000000000 */
        /*0100*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R136+URZ], R135 ;   /* 0x0000000000000000 */
        /*0110*/                   EXIT ;                                                  /* 0x0000000000000000 */
        /*0120*/                   NOP ;                                                   /* 0x0000000000000000 */
        /*0130*/                   USETMAXREG.DEALLOC.CTAPOOL 0x28 ;                       /* 0x0000000000000000 */
        /*0140*/                   ISETP.NE.AND P0, PT, R3, 0x4, PT ;                      /* 0x0000000000000000 */
        /*0150*/               @P0 EXIT ;                                                  /* 0x0000000000000000 */
        /*0160*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR8], R2 ;          /* 0x0000000000000000 */
        /*0170*/                   ELECT P2, URZ, PT ;                                     /* 0x0000000000000000 */
        /*0180*/               @P2 SYNCS.ARRIVE.TRANS64 RZ, [UR9], R2 ;                    /* 0x0000000000000000 */
        /*0190*/                   PLOP3.LUT P0, PT, PT, PT, PT, 0x80, 0x0 ;               /* 0x0000000000000000 */
        /*01a0*/               @P0 ELECT P1, URZ, PT ;                                     /* 0x0000000000000000 */
        /*01b0*/               @P1 R2UR UR14, R2 ;                                         /* 0x0000000000000000 */
        /*01c0*/               @P1 R2UR UR15, R3 ;                                         /* 0x0000000000000000 */
        /*01d0*/               @P1 R2UR UR8, R37 ;                                         /* 0x0000000000000000 */
        /*01e0*/               @P1 PLOP3.LUT P0, PT, P1, PT, PT, 0x8, 0x0 ;                /* 0x0000000000000000 */
        /*01f0*/                   PLOP3.LUT P1, PT, PT, PT, PT, 0x8, 0x0 ;                /* 0x0000000000000000 */
        /*0200*/                   UBLKCP.S.G [UR8], [UR14], UR6 ;                         /* 0x0000000000000000 */
        /*0210*/               @P0 BRA.U.ANY 0x1a0 ;                                       /* 0x0000000000000000 */
        /*0220*/                   EXIT ;                                                  /* 0x0000000000000000 */
        /*0230*/                   BRA 0x230;                                              /* 0x0000000000000000 */
"""

ROLE_LINES = ["ISETP.GT.AND P0, PT, R3, 0x3, PT ; @P0 BRA 0x120", "ISETP.NE.AND P0, PT, R3, 0x4, PT ; @P0 EXIT"]


def _report(text):
    fns = S.parse_sass(text)
    assert len(fns) == 1
    return S.role_report(fns[0])


def test_parse_reads_instructions_guards_and_operands():
    (fn,) = S.parse_sass(SM90)
    assert fn.name == "main_kernel" and len(fn.instrs) == 36  # encoding-only lines are not instructions
    shfl = fn.instrs[4]
    assert (shfl.addr, shfl.guard, shfl.opcode, shfl.operands) == (0x40, "", "SHFL.IDX", ("PT", "R3", "R3", "RZ", "0x1f"))
    bra = next(i for i in fn.instrs if i.addr == 0xF0)
    assert (bra.guard, bra.guard_pred, bra.base, bra.target) == ("!P0", "P0", "BRA", 0xC0)
    assert not bra.uniform_branch
    loop = next(i for i in fn.instrs if i.opcode == "BRA.U.ANY")
    assert loop.uniform_branch and loop.target == 0x1A0
    assert S.parse_instr(0, "@UP1 BRA 0x40").uniform_branch
    assert S.parse_instr(0, "BRA.U 0x40").uniform_branch
    assert not S.parse_instr(0, "@P1 BRA 0x40").uniform_branch
    assert S.parse_instr(0, "LDS R133, [R2.reuse+0x4]").operands == ("R133", "[R2+0x4]")


def test_role_dispatch_of_the_emitted_sm90a_kernel_is_not_uniform():
    rep = _report(SM90)
    assert rep.lines() == ROLE_LINES  # the init branch (lin == 0, not the warp index) is not a role branch
    assert rep.uniform is False
    assert (rep.elect, rep.usetmaxreg, rep.r2ur, rep.shfl, rep.waterfalls) == (2, 2, 3, 1, 1)
    assert (rep.branches, rep.uniform_branches) == (5, 1)
    assert "SHFL.IDX PT, R3, R3, RZ, 0x1f" in rep.warp_index_sources


def test_uniform_predicates_make_the_dispatch_uniform_and_one_divergent_branch_does_not():
    uni = SM90.replace("ISETP.GT.AND P0, PT, R3, 0x3, PT", "UISETP.GT.AND UP0, UPT, UR5, 0x3, UPT") \
              .replace("@P0 BRA 0x120", "@UP0 BRA 0x120") \
              .replace("ISETP.NE.AND P0, PT, R3, 0x4, PT", "UISETP.NE.AND UP1, UPT, UR5, 0x4, UPT") \
              .replace("@P0 EXIT ", "@UP1 EXIT ") \
              .replace("SHFL.IDX PT, R3, R3, RZ, 0x1f", "SHFL.IDX PT, R3, R3, RZ, 0x1f ;\n"
                       "        /*0048*/                   R2UR UR5, R3")
    rep = _report(uni)
    assert len(rep.role_branches) == 2 and rep.uniform is True
    assert all(rb.value_in_uniform_register for rb in rep.role_branches)
    half = uni.replace("@UP1 EXIT ", "@P0 EXIT ").replace("UISETP.NE.AND UP1, UPT, UR5, 0x4, UPT",
                                                          "ISETP.NE.AND P0, PT, R3, 0x4, PT")
    rep = _report(half)
    assert [rb.uniform for rb in rep.role_branches] == [True, False] and rep.uniform is False


def test_no_role_branch_is_not_uniform():
    no_dispatch = SM90.replace("ISETP.GT.AND P0, PT, R3, 0x3, PT", "ISETP.GT.AND P0, PT, R0, 0x3, PT") \
                      .replace("ISETP.NE.AND P0, PT, R3, 0x4, PT", "ISETP.NE.AND P0, PT, R0, 0x4, PT")
    rep = _report(no_dispatch)  # threadIdx.x (a lane-varying value) is not a warp index
    assert rep.role_branches == () and rep.uniform is False


def test_the_warp_index_follows_moves_and_dies_when_overwritten():
    moved = SM90.replace("IMAD.MOV R9, RZ, RZ, -R0", "IMAD.U32 R7, RZ, RZ, R3") \
                .replace("ISETP.NE.AND P0, PT, R2, R9, PT", "ISETP.NE.AND P0, PT, R2, R0, PT") \
                .replace("ISETP.GT.AND P0, PT, R3, 0x3, PT", "ISETP.GT.AND P0, PT, R7, 0x3, PT")
    assert len(_report(moved).role_branches) == 2
    # R3 overwritten on one path only (the init block): not known to hold the warp index after the join
    one_path = SM90.replace("SYNCS.EXCH.64 URZ, [UR10], UR4", "IADD3 R3, R3, 0x1, RZ")
    assert _report(one_path).role_branches == ()
    # overwritten in the producer's block: the consumer/producer branch stays, the producer's EXIT goes
    late = SM90.replace("USETMAXREG.DEALLOC.CTAPOOL 0x28", "IADD3 R3, R3, 0x1, RZ")
    assert _report(late).lines() == ROLE_LINES[:1]


def test_threadidx_x_shifted_by_5_is_a_warp_index_and_redux_is_a_source():
    sm80 = """
\t\tFunction : k
        /*0000*/                   S2R R0, SR_TID.X ;
        /*0010*/                   SHF.R.U32.HI R4, RZ, 0x5, R0 ;
        /*0020*/                   SHF.R.U32.HI R5, RZ, 0x4, R0 ;
        /*0030*/                   ISETP.GT.AND P0, PT, R4, 0x3, PT ;
        /*0040*/               @P0 BRA 0x70 ;
        /*0050*/                   ISETP.GT.AND P1, PT, R5, 0x3, PT ;
        /*0060*/               @P1 BRA 0x70 ;
        /*0070*/                   REDUX.MIN UR4, R4 ;
        /*0080*/                   IMAD.U32 R6, RZ, RZ, UR4 ;
        /*0090*/                   ISETP.NE.AND P2, PT, R6, 0x4, PT ;
        /*00a0*/               @P2 EXIT ;
        /*00b0*/                   EXIT ;
"""
    rep = _report(sm80)
    assert [rb.branch.addr for rb in rep.role_branches] == [0x40, 0xA0]  # tid.x >> 4 is not a warp index
    assert rep.redux == 1 and rep.elect == rep.usetmaxreg == 0


def test_find_tool(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(S, "_site_dirs", lambda: [tmp_path])
    assert S.find_tool("cuobjdump") is None and S.find_cuobjdump() is None
    tool = tmp_path / "nvidia" / "cu13" / "bin" / "cuobjdump"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\n")
    assert S.find_cuobjdump() is None  # not executable
    tool.chmod(0o755)
    assert S.find_cuobjdump() == str(tool)
    with pytest.raises(FileNotFoundError):
        monkeypatch.setattr(S, "_site_dirs", lambda: [])
        S.disassemble(tmp_path / "k.cubin")


def test_ws_sm90a_kernel_sass_end_to_end(tmp_path):
    pytest.importorskip("tvm")
    if shutil.which("nvcc") is None or S.find_cuobjdump() is None:
        pytest.skip("needs nvcc and cuobjdump (pip install 'tvm-twill[sass]')")
    import tvm_twill
    from tvm_twill.frontend.lowering import compile_cuda
    from tvm_twill.workloads import tensorcore_gemm
    sch, k0, k1 = tensorcore_gemm(1024)
    plan = tvm_twill.auto_pipeline(sch, [k0, k1], "sm_90a", warp_specialize=True)
    src = compile_cuda(sch, "sm_90a", tir_pipeline=plan.tir_pipeline)[1]
    (tmp_path / "k.cu").write_text(src)
    r = subprocess.run(["nvcc", "-arch=sm_90a", "-cubin", "-o", str(tmp_path / "k.cubin"), str(tmp_path / "k.cu")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    try:
        text = S.disassemble(tmp_path / "k.cubin")
    except RuntimeError as e:  # cuobjdump without nvdisasm
        pytest.skip(str(e))
    (fn,) = [f for f in S.parse_sass(text) if f.name == "main_kernel"]
    rep = S.role_report(fn)
    assert rep.elect >= 1 and any(line.startswith("ELECT ") for line in fn.lines("ELECT"))  # elect.sync, unguarded
    usetmax = fn.lines("USETMAXREG")
    ws = plan.warp_specialization
    assert any(".DEALLOC" in line and line.endswith(hex(ws.registers[0])) for line in usetmax)  # producer
    assert any(".TRY_ALLOC" in line and line.endswith(hex(ws.registers[1])) for line in usetmax)  # consumers
    assert rep.shfl >= 1 and rep.role_branches
    assert isinstance(rep.uniform, bool) and rep.uniform == all(rb.uniform for rb in rep.role_branches)
    # every role compare tests the shfl'd warp index against the consumer warp count or the producer warp
    n_cwarps = ws.facts.consumer_threads // 32
    imms = {int(op, 0) for rb in rep.role_branches for op in rb.compare.operands[2:4] if re.match(r"0x|\d", op)}
    assert imms <= {n_cwarps - 1, n_cwarps} and n_cwarps - 1 in imms


def test_ptxas_report_reads_registers_and_spills(monkeypatch):
    from tvm_twill.compiler import sass as sass_mod
    src = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] += 1.0f; }\n'
    if shutil.which("nvcc"):
        lines = sass_mod.ptxas_report(src, "sm_80")
        assert any("Used" in ln and "registers" in ln for ln in lines)
        assert any("0 bytes spill stores" in ln for ln in lines)
        with pytest.raises(RuntimeError, match="nvcc -arch=sm_80 failed on the kernel"):
            sass_mod.ptxas_report("this is not CUDA", "sm_80")
    monkeypatch.setattr(sass_mod.shutil, "which", lambda name: None)
    assert sass_mod.ptxas_report(src, "sm_80") is None
