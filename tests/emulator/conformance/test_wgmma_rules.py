"""wgmma's register and warp-group rules, by the PTX ISA ("Asynchronous Warpgroup Level Matrix Multiply-Accumulate
Instructions": wgmma.mma_async, wgmma.fence, wgmma.commit_group, wgmma.wait_group; "setmaxnreg").  One warp group
computes D = A B^T with m64n8k16 (A 64 x 16 and B^T 8 x 16 f16, K-major without swizzle, written by ordinary
stores and fenced to the async proxy), A from shared memory or from registers.  Each case: a legal kernel, clean
with numpy-checked values, and broken variants with the named finding.  Every kernel is assembled by ptxas."""
from __future__ import annotations

import numpy as np
import pytest
from synckit import kernel, kinds, run

from tvm_twill import emulator as E

RNG = np.random.default_rng(23)
A = RNG.integers(-3, 4, size=(64, 16)).astype(np.float16)
BT = RNG.integers(-3, 4, size=(8, 16)).astype(np.float16)


def _image():
    image = np.zeros(2560, np.uint8)
    for base, mat in ((0, A), (2048, BT)):
        rows, ks = np.meshgrid(np.arange(mat.shape[0]), np.arange(16), indexing="ij")
        off = base + (rows % 8) * 16 + (rows // 8) * 256 + (ks // 8) * 128 + (ks % 8) * 2
        image[off.ravel()[:, None] + np.arange(2)] = mat.view(np.uint8).reshape(-1, 2)
    return image.view(np.uint32).copy()


def _a_fragments():
    """Each thread's four A registers (RS form): a[i] at row 16 w + g + 8 ((i >> 1) & 1), k 8 (i >> 2) + 2 q +
    (i & 1) (g = lane / 4, q = lane % 4), two per register, a[2j] in the low half."""
    t = np.arange(128)[:, None]
    i = np.arange(8)[None, :]
    w, lane = t // 32, t % 32
    row = 16 * w + lane // 4 + 8 * ((i >> 1) & 1)
    k = 8 * (i >> 2) + 2 * (lane % 4) + (i & 1)
    h = A[row, k].view(np.uint16).astype(np.uint32)
    return (h[:, 0::2] | (h[:, 1::2] << 16)).astype(np.uint32)


def _want(scale=1.0):
    d = scale * (A.astype(np.float64) @ BT.astype(np.float64).T)
    t, i = np.meshgrid(np.arange(128), np.arange(4), indexing="ij")
    w, lane = t // 32, t % 32
    return d[16 * w + lane // 4 + 8 * ((i // 2) % 2), 2 * (lane % 4) + i % 2].astype(np.float32)


SHARED = "    .shared .align 128 .b8 wsm[2560];\n"
ACC = "{%f1, %f2, %f3, %f4}"
SS = "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 " + ACC + ", %rd21, %rd22, %p4, 1, 1, 0, 0;"
RS = "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 " + ACC + ", {%r50, %r51, %r52, %r53}, %rd22, %p4, 1, 1, 0;"
HEAD = "    mov.u32 %r20, wsm;\n" + "".join(f"""
    add.s32 %r5, %r1, {k * 128};
    mul.wide.u32 %rd8, %r5, 4;
    add.s64 %rd9, %rd1, %rd8;
    ld.global.u32 %r6, [%rd9];
    shl.b32 %r7, %r5, 2;
    add.s32 %r8, %r20, %r7;
    st.shared.u32 [%r8], %r6;""" for k in range(5)) + f"""
    fence.proxy.async.shared::cta;
    bar.sync 0;
    mul.wide.u32 %rd30, %r1, 16;
    add.s64 %rd31, %rd2, %rd30;
    add.s64 %rd32, %rd3, %rd30;
    ld.global.v4.u32 {{%r50, %r51, %r52, %r53}}, [%rd32];
    cvt.u64.u32 %rd20, %r20;
    shr.u64 %rd20, %rd20, 4;
    and.b64 %rd20, %rd20, 16383;
    or.b64 %rd21, %rd20, {(128 >> 4) << 16 | (256 >> 4) << 32};
    add.s64 %rd22, %rd21, {2048 >> 4};
    setp.eq.u32 %p4, %r1, %r1;
    mov.f32 %f1, 0f00000000;
    mov.f32 %f2, 0f00000000;
    mov.f32 %f3, 0f00000000;
    mov.f32 %f4, 0f00000000;
"""
TAIL = """
    st.global.f32 [%rd31], %f1;
    st.global.f32 [%rd31+4], %f2;
    st.global.f32 [%rd31+8], %f3;
    st.global.f32 [%rd31+12], %f4;"""


def body(mma=SS, gap="", second=""):
    """fence, wgmma, commit, ``gap``, wait; ``second``: a second round after the wait."""
    return HEAD + f"""
    wgmma.fence.sync.aligned;
    {mma}
    wgmma.commit_group.sync.aligned;
    {gap}
    wgmma.wait_group.sync.aligned 0;
{second}""" + TAIL


def go(text, threads=128, policy=None):
    out = np.zeros((128, 4), np.float32)
    rep = run(kernel(text, SHARED, target="sm_90a"), threads, _image(), out, _a_fragments(), policy=policy)
    return rep, out


@pytest.mark.parametrize("mma", [SS, RS], ids=["A from shared memory", "A from registers"])
def test_a_legal_wgmma_runs_clean(mma):
    rep, out = go(body(mma))
    assert rep.ok, str(rep)
    np.testing.assert_array_equal(out, _want())


@pytest.mark.parametrize("gap, kind", [
    ("add.f32 %f10, %f1, %f1;", "AsyncReadBeforeWait"),
    ("mov.f32 %f2, 0f3F800000;", "InFlightOverwrite"),
])
def test_touching_an_accumulator_in_flight_is_a_finding(gap, kind):
    """"Accessing the accumulator register ... of a wgmma.mma_async instruction without first performing a
    wgmma.wait_group instruction that waits on a wgmma-group including that wgmma.mma_async instruction is
    undefined behavior": a read and a write between the commit and the covering wait."""
    rep, _ = go(body(gap=gap))
    assert kind in kinds(rep), str(rep)


@pytest.mark.parametrize("gap, kind", [
    ("mov.b32 %r60, %r50;", "AsyncReadBeforeWait"),
    ("xor.b32 %r51, %r51, 1;", "InFlightOverwrite"),
])
def test_touching_an_a_fragment_register_in_flight_is_a_finding(gap, kind):
    """The same rule for "the input register containing fragments of matrix A" of the register-A form."""
    rep, _ = go(body(RS, gap=gap))
    assert kind in kinds(rep), str(rep)


SECOND = """
    add.f32 %f1, %f1, %f1;
    add.f32 %f2, %f2, %f2;
    add.f32 %f3, %f3, %f3;
    add.f32 %f4, %f4, %f4;
    wgmma.fence.sync.aligned;
    {mma}
    wgmma.commit_group.sync.aligned;
    wgmma.wait_group.sync.aligned 0;"""


@pytest.mark.parametrize("mma", [SS, RS], ids=["A from shared memory", "A from registers"])
def test_wgmma_fence_between_register_writes_and_the_wgmma(mma):
    """"wgmma.fence": it must be issued before the first wgmma.mma_async, and between a register access and a
    wgmma.mma_async that accesses the same registers.  Legal: D = A B, doubled by the threads, fence, D += A B
    (3 A B).  Broken: no fence at all; no fence between the doubling and the second wgmma; with
    ``Policy(strict_wgmma_fence=True)``, the accumulators zeroed after the first fence (nvcc's placement)."""
    second = SECOND.format(mma=mma)
    rep, out = go(body(mma, second=second))
    assert rep.ok, str(rep)
    np.testing.assert_array_equal(out, _want(3.0))
    rep, _ = go(body(mma, second=second).replace("wgmma.fence.sync.aligned;", "", 1))
    assert "WgmmaFenceMissing" in kinds(rep), str(rep)
    broken = body(mma, second=second.replace("    wgmma.fence.sync.aligned;\n", ""))
    rep, _ = go(broken)
    assert "WgmmaFenceMissing" in kinds(rep), str(rep)
    late_zero = body(mma).replace("    mov.f32 %f1, 0f00000000;\n", "").replace(
        "wgmma.fence.sync.aligned;", "wgmma.fence.sync.aligned;\n    mov.f32 %f1, 0f00000000;")
    rep, out = go(late_zero)
    assert rep.ok, str(rep)
    np.testing.assert_array_equal(out, _want())
    rep, _ = go(late_zero, policy=E.Policy(strict_wgmma_fence=True))
    assert "WgmmaFenceMissing" in kinds(rep), str(rep)


PART = "    setp.ge.u32 %p6, %r1, 64;\n    @%p6 bra $SKIP;\n"


def test_wgmma_by_part_of_a_warp_group_or_a_misaligned_one_is_a_finding():
    """wgmma.mma_async is .sync.aligned over the warp group (four consecutive warps, the first a multiple of 4):
    warps 2 and 3 skipping it, or a CTA of three warps, is a BarrierMismatch."""
    text = body().replace("    wgmma.fence.sync.aligned;", PART + "    wgmma.fence.sync.aligned;").replace(
        "    wgmma.wait_group.sync.aligned 0;", "    wgmma.wait_group.sync.aligned 0;\n$SKIP:")
    rep, _ = go(text)
    assert "BarrierMismatch" in kinds(rep), str(rep)
    rep, _ = go(body(), threads=96)
    assert "BarrierMismatch" in kinds(rep), str(rep)


SETMAXNREG = """
    and.b32 %r5, %r2, 7;
    setmaxnreg.dec.sync.aligned.u32 40;
    st.global.u32 [%rd5], %r5;"""


def test_setmaxnreg_by_part_of_a_warp_group_or_a_misaligned_one_is_a_finding():
    """"setmaxnreg": .sync.aligned, executed by all warps of the warp group; part of it (warps 0 and 1) or a CTA of
    three warps is a SetmaxnregMisuse."""
    x = np.arange(128, dtype=np.uint32) * 3
    out = np.zeros(128, np.uint32)
    rep = run(kernel(SETMAXNREG, target="sm_90a"), 128, x, out)
    assert rep.ok, str(rep)
    np.testing.assert_array_equal(out, x & 7)
    part = SETMAXNREG.replace("    setmaxnreg", PART + "    setmaxnreg").replace(
        "st.global", "$SKIP:\n    st.global")
    rep = run(kernel(part, target="sm_90a"), 128, x.copy(), np.zeros(128, np.uint32))
    assert "SetmaxnregMisuse" in kinds(rep), str(rep)
    rep = run(kernel(SETMAXNREG, target="sm_90a"), 96, x.copy(), np.zeros(128, np.uint32))
    assert "SetmaxnregMisuse" in kinds(rep), str(rep)
