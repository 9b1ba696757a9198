"""Instruction families of the emulator on tiny hand-written PTX kernels, against numpy; and the findings
(race, async read before wait, mbarrier misuse, deadlock, divergent/mismatched barrier, bad access, trap)."""
import numpy as np
import pytest

from tvm_twill import emulator as E
from tvm_twill.emulator import findings as F
from tvm_twill.errors import EmulationError

HEAD = ".version 9.0\n.target sm_80\n.address_size 64\n"
REGS = """
    .reg .pred %p<8>;
    .reg .b16 %rs<8>;
    .reg .b32 %r<40>;
    .reg .f32 %f<16>;
    .reg .b64 %rd<16>;
"""


def kernel(body, nparams=2, shared=""):
    params = ",\n".join(f"    .param .u64 k_param_{i}" for i in range(nparams))
    return f"{HEAD}.visible .entry k(\n{params}\n)\n{{\n{REGS}{shared}\n{body}\n    ret;\n}}\n"


def launch(nparams=2, threads=32, dyn=0):
    return E.Launch("k", (1, 1, 1), (threads, 1, 1), dyn, tuple(("buffer", i, 0) for i in range(nparams)))


PROLOGUE = """
    ld.param.u64 %rd1, [k_param_0];
    ld.param.u64 %rd2, [k_param_1];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    add.s64 %rd5, %rd2, %rd3;
"""


def run_lanes(body, x, out_dtype=np.uint32, threads=32, **kw):
    """Run body with %r2 = x[tid] (as b32) and store %r3 to out[tid]."""
    x = np.ascontiguousarray(x)
    out = np.zeros(threads, out_dtype)
    src = kernel(PROLOGUE + "    ld.global.b32 %r2, [%rd4];\n" + body + "    st.global.b32 [%rd5], %r3;\n")
    report = E.run_ptx(src, [launch(threads=threads)], x, out, **kw)
    return report, out


LANE = np.arange(32, dtype=np.uint32)


def test_integer_alu_matches_numpy():
    x = (LANE * 2654435761).astype(np.uint32)
    cases = {
        "add.s32 %r3, %r2, -7;": (x.astype(np.int64) - 7) % 2**32,
        "mul.lo.s32 %r3, %r2, 3;": (x.astype(np.uint64) * 3) % 2**32,
        "shl.b32 %r3, %r2, 5;": (x.astype(np.uint64) << 5) % 2**32,
        "shr.s32 %r3, %r2, 31;": np.where(x.view(np.int32) < 0, 2**32 - 1, 0),
        "shr.u32 %r3, %r2, 33;": np.zeros(32),
        "mul.hi.u32 %r3, %r2, %r2;": (x.astype(object) * x.astype(object)) >> 32,
        "bfe.u32 %r3, %r2, 4, 8;": (x >> 4) & 0xFF,
        "prmt.b32 %r3, %r2, 0, 0x3210;": x,
        "prmt.b32 %r3, %r2, 0, 0x0123;": x.byteswap(),
        "lop3.b32 %r3, %r2, 255, 0, 0xC0;": x & 255,
        "xor.b32 %r3, %r2, -1;": ~x,
        "min.s32 %r3, %r2, 0;": np.minimum(x.view(np.int32), 0).view(np.uint32),
        "rem.u32 %r3, %r2, 7;": x % 7,
        "div.s32 %r3, %r2, -3;": np.trunc(x.view(np.int32) / -3).astype(np.int32).view(np.uint32),
    }
    for body, want in cases.items():
        report, out = run_lanes("    " + body + "\n", x)
        assert report.ok, str(report)
        np.testing.assert_array_equal(out, np.asarray(want, dtype=object).astype(np.uint64).astype(np.uint32),
                                      err_msg=body)


def test_wide_setp_selp_and_cvt():
    x = (LANE * 100003).astype(np.uint32)
    body = """
    mul.wide.u32 %rd6, %r2, %r2;
    shr.u64 %rd7, %rd6, 20;
    cvt.u32.u64 %r4, %rd7;
    setp.gt.u32 %p1, %r2, 1000000;
    selp.b32 %r3, %r4, 0, %p1;
"""
    report, out = run_lanes(body, x)
    want = np.where(x > 1000000, (x.astype(np.uint64) ** 2 >> 20) % 2**32, 0)
    assert report.ok
    np.testing.assert_array_equal(out, want.astype(np.uint32))


def test_float_fma_minmax_nan_and_conversions():
    xf = np.linspace(-3, 3, 32).astype(np.float32)
    xf[5] = np.nan
    body = """
    mov.b32 %f1, %r2;
    fma.rn.f32 %f2, %f1, %f1, 0f3F800000;
    max.f32 %f3, %f1, 0f00000000;
    add.f32 %f4, %f2, %f3;
    cvt.rn.f16.f32 %rs1, %f4;
    cvt.f32.f16 %f5, %rs1;
    mov.b32 %r3, %f5;
"""
    report, out = run_lanes(body, xf.view(np.uint32))
    assert report.ok, str(report)
    got = out.view(np.float32)
    x64 = xf.astype(np.float64)
    fma = (x64 * x64 + 1).astype(np.float32)
    mx = np.where(np.isnan(xf), np.float32(0), np.maximum(xf, 0))   # PTX max drops the NaN operand
    want = (fma + mx).astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(got[ok], want[ok])
    assert not np.isnan(got[5]) or np.isnan(fma[5])


def test_cvt_rounding_modes_and_saturation():
    xf = np.array([2.5, -2.5, 1.5, 3e10, -7.9, np.nan] + [0.25] * 26, np.float32)
    for mode, f in (("rni", np.rint), ("rzi", np.trunc), ("rmi", np.floor), ("rpi", np.ceil)):
        report, out = run_lanes(f"    mov.b32 %f1, %r2;\n    cvt.{mode}.s32.f32 %r3, %f1;\n", xf.view(np.uint32))
        want = np.where(np.isnan(xf), 0, np.clip(f(xf.astype(np.float64)), -2**31, 2**31 - 1)).astype(np.int32)
        np.testing.assert_array_equal(out.view(np.int32), want, err_msg=mode)
    report, out = run_lanes("    mov.b32 %f1, %r2;\n    cvt.sat.f32.f32 %f2, %f1;\n    mov.b32 %r3, %f2;\n",
                            xf.view(np.uint32))
    assert report.ok, str(report)
    np.testing.assert_array_equal(out.view(np.float32), np.clip(np.nan_to_num(xf), 0, 1))


def test_approximate_functions_within_tolerance():
    xf = np.linspace(0.1, 4, 32).astype(np.float32)
    for op, f in (("ex2.approx.ftz.f32", np.exp2), ("rsqrt.approx.f32", lambda v: 1 / np.sqrt(v)),
                  ("lg2.approx.f32", np.log2), ("rcp.rn.f32", lambda v: 1 / v)):
        report, out = run_lanes(f"    mov.b32 %f1, %r2;\n    {op} %f2, %f1;\n    mov.b32 %r3, %f2;\n",
                                xf.view(np.uint32))
        assert report.ok, str(report)
        np.testing.assert_allclose(out.view(np.float32), f(xf.astype(np.float64)), rtol=2e-7, err_msg=op)


def test_mov_packs_and_unpacks_halves():
    x = (LANE * 0x10001 + 0x30002).astype(np.uint32)
    body = """
    mov.b32 {%rs1, %rs2}, %r2;
    mov.b32 %r3, {%rs2, %rs1};
"""
    report, out = run_lanes(body, x)
    assert report.ok, str(report)
    np.testing.assert_array_equal(out, ((x >> 16) | (x << 16)).astype(np.uint32))


def test_divergent_branches_reconverge():
    body = """
    and.b32 %r5, %r1, 1;
    setp.eq.s32 %p1, %r5, 0;
    mov.u32 %r3, 0;
    @%p1 bra $EVEN;
    add.s32 %r3, %r2, 100;
    bra.uni $JOIN;
$EVEN:
    add.s32 %r3, %r2, 200;
$JOIN:
    add.s32 %r3, %r3, 1;
"""
    report, out = run_lanes(body, LANE)
    assert report.ok
    np.testing.assert_array_equal(out, LANE + np.where(LANE % 2 == 0, 201, 101))


def test_shfl_vote_and_activemask():
    for body, want in {
        "shfl.sync.down.b32 %r3|%p2, %r2, 3, 31, -1;": np.where(LANE + 3 < 32, LANE + 3, LANE),
        "shfl.sync.bfly.b32 %r3, %r2, 5, 31, -1;": LANE ^ 5,
        "shfl.sync.idx.b32 %r3, %r2, 7, 31, -1;": np.full(32, 7),
        "shfl.sync.up.b32 %r3, %r2, 2, 0, -1;": np.where(LANE >= 2, LANE - 2, LANE),
        "setp.lt.u32 %p1, %r2, 4;\n    vote.sync.ballot.b32 %r3, %p1, -1;": np.full(32, 0xF),
        "activemask.b32 %r3;": np.full(32, 0xFFFFFFFF),
    }.items():
        report, out = run_lanes("    " + body + "\n", LANE)
        assert report.ok, str(report)
        np.testing.assert_array_equal(out, want.astype(np.uint32), err_msg=body)


SHARED = "    .shared .align 16 .b8 sbuf[1024];\n"


def test_shared_vector_store_load_through_bar_sync():
    # each warp writes its lane ids, bar.sync, then reads the other warp's
    body = PROLOGUE.replace("mov.u32 %r1, %tid.x;", "mov.u32 %r1, %tid.x;") + """
    mov.u32 %r6, sbuf;
    shl.b32 %r7, %r1, 2;
    add.s32 %r8, %r6, %r7;
    st.shared.u32 [%r8], %r1;
    bar.sync 0;
    xor.b32 %r9, %r7, 128;
    add.s32 %r10, %r6, %r9;
    ld.shared.u32 %r3, [%r10];
    st.global.b32 [%rd5], %r3;
"""
    out = np.zeros(64, np.uint32)
    report = E.run_ptx(kernel(body, shared=SHARED), [launch(threads=64)], np.zeros(64, np.uint32), out,
                       interleavings=4)
    assert report.ok, str(report)
    np.testing.assert_array_equal(out, np.arange(64, dtype=np.uint32) ^ 32)


def test_race_without_bar_sync_names_both_accesses():
    body = PROLOGUE + """
    mov.u32 %r6, sbuf;
    shl.b32 %r7, %r1, 2;
    add.s32 %r8, %r6, %r7;
    st.shared.u32 [%r8], %r1;
    xor.b32 %r9, %r7, 128;
    add.s32 %r10, %r6, %r9;
    ld.shared.u32 %r3, [%r10];
    bar.sync 0;
    st.shared.u32 [%r8], %r1;
"""
    report = E.run_ptx(kernel(body, shared=SHARED), [launch(threads=64)], np.zeros(64, np.uint32),
                       np.zeros(64, np.uint32), interleavings=4)
    races = [f for f in report.findings if isinstance(f, F.DataRace)]
    assert races and not report.ok
    assert races[0].other[3] in ("read", "write") and races[0].where.ptx_line > 0


def test_cp_async_read_before_wait_is_reported_and_wait_fixes_it():
    def body(wait):
        return PROLOGUE + f"""
    mov.u32 %r6, sbuf;
    shl.b32 %r7, %r1, 2;
    add.s32 %r8, %r6, %r7;
    cp.async.ca.shared.global [%r8], [%rd4], 4;
    cp.async.commit_group;
    {"cp.async.wait_group 0;" if wait else ""}
    ld.shared.u32 %r3, [%r8];
    st.global.b32 [%rd5], %r3;
"""
    x = LANE * 3
    out = np.zeros(32, np.uint32)
    report = E.run_ptx(kernel(body(True), shared=SHARED), [launch()], x, out)
    assert report.ok, str(report)
    np.testing.assert_array_equal(out, x)
    report = E.run_ptx(kernel(body(False), shared=SHARED), [launch()], x, np.zeros(32, np.uint32))
    kinds = {f.kind for f in report.findings}
    assert "AsyncReadBeforeWait" in kinds and "PoisonUse" in kinds


MBAR = "    .shared .align 8 .b64 mbar;\n" + SHARED


def test_mbarrier_use_before_init_and_over_arrival():
    body = """
    mov.u32 %r6, mbar;
    mbarrier.arrive.shared.b64 _, [%r6];
"""
    report = E.run_ptx(kernel(body, shared=MBAR), [launch()], np.zeros(1), np.zeros(1))
    assert any(isinstance(f, F.MbarrierMisuse) and "before init" in f.message for f in report.findings)
    body = """
    mov.u32 %r6, mbar;
    mov.u32 %r1, %tid.x;
    setp.ne.s32 %p1, %r1, 0;
    @%p1 bra $SKIP;
    mbarrier.init.shared.b64 [%r6], 16;
$SKIP:
    bar.sync 0;
    mbarrier.arrive.shared.b64 _, [%r6];
"""
    report = E.run_ptx(kernel(body, shared=MBAR), [launch()], np.zeros(1), np.zeros(1))
    assert any(isinstance(f, F.MbarrierMisuse) and "over-arrival" in f.message for f in report.findings)


def test_mbarrier_wait_deadlock_lists_blocked_warps():
    body = """
    mov.u32 %r6, mbar;
    mov.u32 %r1, %tid.x;
    setp.ne.s32 %p1, %r1, 0;
    @%p1 bra $SKIP;
    mbarrier.init.shared.b64 [%r6], 64;
$SKIP:
    bar.sync 0;
$WAIT:
    mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 %p2, [%r6], 0, 0x989680;
    @!%p2 bra $WAIT;
"""
    report = E.run_ptx(kernel(body, shared=MBAR), [launch(threads=64)], np.zeros(1), np.zeros(1))
    dead = [f for f in report.findings if isinstance(f, F.Deadlock)]
    assert dead and len(dead[0].blocked) == 2


def test_bar_sync_count_mismatch_and_divergent_barrier():
    body = """
    mov.u32 %r1, %tid.x;
    setp.lt.u32 %p1, %r1, 32;
    @%p1 bra $A;
    bar.sync 1, 64;
    bra.uni $END;
$A:
    bar.sync 1, 96;
$END:
"""
    report = E.run_ptx(kernel(body), [launch(threads=64)], np.zeros(1), np.zeros(1))
    assert any(isinstance(f, F.BarrierMismatch) for f in report.findings)
    # the two halves of the warp at different bar.sync instructions (.aligned); lanes that exit instead would
    # be legal: a barrier waits only for threads that have not exited
    body = """
    mov.u32 %r1, %tid.x;
    setp.lt.u32 %p1, %r1, 16;
    @%p1 bra $A;
    bar.sync 0;
    bra.uni $END;
$A:
    bar.sync 0;
$END:
"""
    report = E.run_ptx(kernel(body), [launch()], np.zeros(1), np.zeros(1))
    assert any(isinstance(f, F.BarrierMismatch) and "divergent" in f.message for f in report.findings)


def test_out_of_bounds_misaligned_and_trap():
    report, _ = run_lanes("    add.s64 %rd6, %rd4, 4096;\n    ld.global.b32 %r3, [%rd6];\n", LANE)
    assert any(isinstance(f, F.BadAccess) for f in report.findings)
    report, _ = run_lanes("    add.s64 %rd6, %rd4, 2;\n    ld.global.b32 %r3, [%rd6];\n", LANE)
    assert any(isinstance(f, F.BadAccess) and "misaligned" in f.message for f in report.findings)
    report, _ = run_lanes("    trap;\n", LANE)
    assert any(isinstance(f, F.Trap) for f in report.findings)


def test_unknown_opcode_raises_with_its_line():
    with pytest.raises(EmulationError, match=r"unsupported opcode frobnicate.b32 at PTX line \d+"):
        run_lanes("    frobnicate.b32 %r3, %r2;\n", LANE)


def test_fma_rounding_modes():
    xf = np.array([1 + 2**-23] * 32, np.float32)
    body = "    mov.b32 %f1, %r2;\n    fma.{m}.f32 %f2, %f1, %f1, 0f00000000;\n    mov.b32 %r3, %f2;\n"
    exact = (1 + 2**-23) ** 2        # 1 + 2^-22 + 2^-46: between two floats
    down, up = np.float32(1 + 2**-22), np.nextafter(np.float32(1 + 2**-22), np.float32(2))
    for m, want in (("rn", down), ("rz", down), ("rm", down), ("rp", up)):
        report, out = run_lanes(body.format(m=m), xf.view(np.uint32))
        assert report.ok, str(report)
        assert out.view(np.float32)[0] == want, (m, exact)


def test_elect_sync_picks_one_leader_and_setmaxnreg_is_checked():
    body = """
    elect.sync %r4|%p1, -1;
    selp.b32 %r5, 1, 0, %p1;
    shl.b32 %r6, %r4, 8;
    or.b32 %r3, %r6, %r5;
"""
    leaders = set()
    for seed in range(6):
        report, out = run_lanes(body, LANE, seed=seed)
        assert report.ok, str(report)
        assert (out & 1).sum() == 1                       # one lane elected
        leader = int(np.nonzero(out & 1)[0][0])
        assert (out >> 8 == leader).all()                 # every lane learns the leader
        leaders.add(leader)
    assert leaders == {0}       # the same leader for the same mask (PTX ISA); Policy(elect="highest") moves it
    report, _ = run_lanes("    setmaxnreg.inc.sync.aligned.u32 20;\n", LANE)
    assert any(isinstance(f, F.SetmaxnregMisuse) for f in report.findings)


BULK = """
    mov.u32 %r6, mbar;
    mov.u32 %r7, sbuf;
    mov.u32 %r1, %tid.x;
    setp.ne.s32 %p1, %r1, 0;
    @%p1 bra $SKIP;
    mbarrier.init.shared.b64 [%r6], 1;
    fence.mbarrier_init.release.cluster;
$SKIP:
    bar.sync 0;
    @%p1 bra $WAIT;
    mbarrier.arrive.expect_tx.shared.b64 _, [%r6], {tx};
    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r7], [%rd1], 128, [%r6];
$WAIT:
    mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 %p2, [%r6], 0, 0x989680;
    @!%p2 bra $WAIT;
    shl.b32 %r8, %r1, 2;
    add.s32 %r9, %r7, %r8;
    ld.shared.u32 %r3, [%r9];
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd5, %rd2, %rd3;
    st.global.b32 [%rd5], %r3;
"""


def test_bulk_copy_completes_on_its_mbarrier_and_tx_underflow_is_reported():
    head = "    ld.param.u64 %rd1, [k_param_0];\n    ld.param.u64 %rd2, [k_param_1];\n"
    x = (LANE * 7 + 1).astype(np.uint32)
    out = np.zeros(32, np.uint32)
    report = E.run_ptx(kernel(head + BULK.format(tx=128), shared=MBAR), [launch()], x, out, interleavings=3)
    assert report.ok, str(report)
    np.testing.assert_array_equal(out, x)
    report = E.run_ptx(kernel(head + BULK.format(tx=64), shared=MBAR), [launch()], x, np.zeros(32, np.uint32))
    assert any(isinstance(f, F.MbarrierMisuse) and "underflow" in f.message for f in report.findings), str(report)


def test_atomics_on_shared_and_global():
    body = PROLOGUE + """
    mov.u32 %r6, sbuf;
    mov.u32 %r10, 0;
    setp.ne.s32 %p1, %r1, 0;
    @%p1 bra $SKIP;
    st.shared.u32 [%r6], %r10;
$SKIP:
    bar.sync 0;
    atom.shared.add.u32 %r11, [%r6], 1;
    red.global.add.u32 [%rd2], %r1;
    atom.global.max.s32 %r12, [%rd2+4], %r1;
    bar.sync 0;
    ld.shared.u32 %r3, [%r6];
    @%p1 bra $END;
    st.global.b32 [%rd2+8], %r3;
$END:
"""
    out = np.zeros(64, np.uint32)
    report = E.run_ptx(kernel(body, shared=SHARED), [launch(threads=64)], np.zeros(64, np.uint32), out,
                       interleavings=3)
    assert report.ok, str(report)
    assert out[0] == sum(range(64)) and out[1] == 63 and out[2] == 64


def test_shfl_by_a_lane_outside_its_membermask_is_reported():
    report, _ = run_lanes("    shfl.sync.idx.b32 %r3, %r2, 0, 31, 65535;\n", LANE)
    bad = [f for f in report.findings if isinstance(f, F.BarrierMismatch)]
    assert bad and bad[0].where.lanes == tuple(range(16, 32))


def test_random_completion_policy_keeps_correct_programs_clean():
    body = PROLOGUE + """
    mov.u32 %r6, sbuf;
    shl.b32 %r7, %r1, 2;
    add.s32 %r8, %r6, %r7;
    cp.async.ca.shared.global [%r8], [%rd4], 4;
    cp.async.commit_group;
    add.s32 %r11, %r1, 1;
    cp.async.wait_group 0;
    bar.sync 0;
    xor.b32 %r9, %r7, 128;
    add.s32 %r10, %r6, %r9;
    ld.shared.u32 %r3, [%r10];
    st.global.b32 [%rd5], %r3;
"""
    x = np.arange(64, dtype=np.uint32) * 5
    out = np.zeros(64, np.uint32)
    report = E.run_ptx(kernel(body, shared=SHARED), [launch(threads=64)], x, out, interleavings=6,
                       policy=E.Policy(completion="random", slice=3))
    assert report.ok, str(report)
    np.testing.assert_array_equal(out, x[np.arange(64) ^ 32])
