"""Bulk stores (shared to global) and their bulk async-groups on hand-written PTX, against numpy; the rules
of the PTX ISA the emulator checks for them; and multicast refused in one line (clusters are not modelled)."""
import numpy as np
import pytest

from tvm_twill import emulator as E
from tvm_twill.emulator import findings as F
from tvm_twill.errors import EmulationError

HEAD = ".version 8.0\n.target sm_90a\n.address_size 64\n"


def kernel(body):
    return f"""{HEAD}.visible .entry k(
    .param .u64 k_param_0
)
{{
    .reg .pred %p<4>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<8>;
    .shared .align 128 .b8 sbuf[512];
    ld.param.u64 %rd1, [k_param_0];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    mov.u32 %r6, sbuf;
    shl.b32 %r7, %r1, 2;
    add.s32 %r8, %r6, %r7;
    mul.lo.s32 %r9, %r1, 3;
    st.shared.u32 [%r8], %r9;
{body}
    ret;
}}
"""


STORE = """
    {fence}
    bar.sync 0;
    setp.ne.s32 %p1, %r1, 0;
    @%p1 bra $END;
    cp.async.bulk.global.shared::cta.bulk_group [%rd2], [%r6], {size};
    cp.async.bulk.commit_group;
    {between}
    cp.async.bulk.wait_group{read} 0;
$END:
"""


def run(fence="fence.proxy.async.shared::cta;", size=256, between="", read=".read", threads=64, **kw):
    out = np.zeros(threads, np.uint32)
    src = kernel(STORE.format(fence=fence, size=size, between=between, read=read))
    report = E.run_ptx(src, [E.Launch("k", (1, 1, 1), (threads, 1, 1), 0, (("buffer", 0, 0),))], out, **kw)
    run.src = src
    return report, out


@pytest.mark.parametrize("read", [".read", ""])
def test_bulk_store_copies_shared_to_global_at_its_wait(read):
    report, out = run(read=read, interleavings=3)
    assert report.ok, str(report)
    np.testing.assert_array_equal(out, np.arange(64, dtype=np.uint32) * 3)


def test_bulk_store_under_random_completion_still_copies():
    report, out = run(interleavings=4, policy=E.Policy(completion="random", slice=2))
    assert report.ok, str(report)
    np.testing.assert_array_equal(out, np.arange(64, dtype=np.uint32) * 3)


def test_bulk_store_of_ordinary_stores_without_a_proxy_fence_is_reported():
    report, _ = run(fence="")
    assert any(isinstance(f, F.ProxyFenceMissing) for f in report.findings), str(report)


def test_bulk_store_source_written_before_the_read_wait_is_reported():
    write = "st.shared.u32 [%r6], %r1;"
    report, _ = run(between=write)
    bad = [f for f in report.findings if isinstance(f, F.InFlightOverwrite)]
    line = next(k for k, text in enumerate(run.src.splitlines(), 1) if text.strip() == write)
    assert bad and bad[0].where.ptx_line == line and "bulk store" in bad[0].message, str(report)


def test_bulk_store_source_read_before_the_wait_is_fine():
    report, out = run(between="ld.shared.u32 %r10, [%r6+4];")
    assert report.ok, str(report)
    np.testing.assert_array_equal(out, np.arange(64, dtype=np.uint32) * 3)


def test_bulk_store_reading_other_warps_writes_without_a_barrier_is_a_race():
    src = kernel(STORE.format(fence="fence.proxy.async.shared::cta;", size=256, between="", read=".read")
                 .replace("bar.sync 0;", ""))
    out = np.zeros(64, np.uint32)
    report = E.run_ptx(src, [E.Launch("k", (1, 1, 1), (64, 1, 1), 0, (("buffer", 0, 0),))], out, interleavings=2)
    assert any(isinstance(f, F.DataRace) and "bulk store" in f.message for f in report.findings), str(report)


def test_bulk_store_size_must_be_a_multiple_of_16():
    report, _ = run(size=100)
    assert any(isinstance(f, F.BadAccess) and "multiples of 16" in f.message for f in report.findings)


def test_bulk_store_outside_the_buffer_is_reported():
    report, _ = run(size=512, threads=64)
    assert any(isinstance(f, F.BadAccess) and "outside every buffer" in f.message for f in report.findings)


def test_multicast_is_refused_with_one_clear_line():
    multicast = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
    body = f"""
    mov.b64 %rd3, k_param_0;
    mov.u16 %rs1, 15;
    {multicast} [%r6], [%rd3, {{%r1, %r1}}], [%r6], %rs1;
"""
    src = kernel(body).replace(".reg .b64 %rd<8>;", ".reg .b64 %rd<8>;\n    .reg .b16 %rs<4>;")
    with pytest.raises(EmulationError, match=r"multicast::cluster at PTX line \d+: .* does not model clusters"):
        E.load_ptx(src)


TMA_STORE = """
    cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd3, {%r2, %r2}], [%r7];
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group.read 0;
"""
TMA_LOAD = f"""{HEAD}.visible .entry k(
    .param .align 64 .b8 k_param_0[128]
)
{{
    .reg .pred %p<4>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<8>;
    .shared .align 128 .b8 sbuf[2048];
    .shared .align 8 .b8 mbar[8];
    mov.b64 %rd1, k_param_0;
    cvta.param.u64 %rd3, %rd1;
    mov.u32 %r1, %tid.x;
    mov.u32 %r6, mbar;
    mov.u32 %r7, sbuf;
    mov.u32 %r2, 0;
    setp.ne.s32 %p1, %r1, 0;
    @%p1 bra $END;
    mbarrier.init.shared.b64 [%r6], 1;
    fence.mbarrier_init.release.cluster;
    mbarrier.arrive.expect_tx.shared.b64 _, [%r6], 2048;
    cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r7], [%rd3, {{%r2, %r2}}], [%r6];
$WAIT:
    mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 %p2, [%r6], 0, 0x989680;
    @!%p2 bra $WAIT;
$END:
    ret;
}}
"""


@pytest.mark.parametrize("store", [False, True])
@pytest.mark.parametrize("rows", [32, 16])
def test_a_tensor_map_describing_more_than_its_array_is_reported(rows, store):
    """A 32 x 16 float32 map over an array of ``rows`` x 16: the box's rows past the array are a bad access
    (not a silent zero fill or a skipped store: inside the map they are not out of bounds)."""
    from tvm_twill.emulator.tensormap import from_encode_args
    tm = from_encode_args("float32", 2, (0, 0), [16, 32, 64, 16, 32, 1, 1, 0, 0, 0, 0])
    a = np.ones((rows, 16), np.float32)
    src = TMA_LOAD
    if store:       # after the load, store the box back through the same map
        src = src.replace("    @!%p2 bra $WAIT;\n", "    @!%p2 bra $WAIT;\n" + TMA_STORE)
        assert src != TMA_LOAD
    report = E.run_ptx(src, [E.Launch("k", (1, 1, 1), (32, 1, 1), 0, (("tensormap", tm),))], a)
    bad = [f for f in report.findings if isinstance(f, F.BadAccess) and "past the end" in f.message]
    assert len(bad) == (0 if rows == 32 else 1 + store), str(report)
    assert report.ok or rows < 32, str(report)
