"""Data races on the global side of async copies: a cp.async or a bulk / TMA load reads global memory, a
bulk / TMA store writes it, at some moment between its issue and the event that completes it (the
issuer's cp.async.wait_group, the mbarrier complete-tx, the issuer's cp.async.bulk.wait_group but not
``.read``).  Hand-written sm_90a PTX plants each race; the finding must sit on the planted line and name
the copy's line, and the correctly ordered variant must report nothing."""
import numpy as np

from tvm_twill import emulator as E
from tvm_twill.emulator import findings as F

HEAD = ".version 8.7\n.target sm_90a\n.address_size 64\n"
# a float32 16 x 16 tensor (arg 0); CTA c's tile is rows 4c .. 4c + 3: bytes 256c .. 256c + 255
TMAP = E.TensorMap("float32", 2, (0, 0), (16, 16), (64,), (16, 4), (1, 1), 0, 0, 0, 0)
FRAME = """
    ld.param.u64 %rd1, [k_param_1];
    ld.param.u64 %rd2, [k_param_2];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.b64 %rd10, k_param_0;
    cvta.param.u64 %rd11, %rd10;
    mov.u32 %r20, tbuf;
    mov.u32 %r30, mbar;
    mov.u32 %r32, 0;
    shl.b32 %r33, %r2, 2;
    shl.b32 %r34, %r2, 8;
    cvt.u64.u32 %rd3, %r34;
    add.s64 %rd4, %rd1, %rd3;
    setp.ne.s32 %p1, %r1, 0;
    setp.ge.u32 %p3, %r1, 32;
    shl.b32 %r21, %r1, 2;
    add.s32 %r22, %r20, %r21;
    cvt.u64.u32 %rd12, %r21;
    add.s64 %rd9, %rd2, %rd12;
"""
# %rd1: the tensor, %rd4: this CTA's tile in it, %rd2: out, %rd9: this thread's word of out; %r22: this
# thread's word of tbuf;
# %p1: not thread 0, %p3: warp 1; {%r32, %r33}: the tile's coordinates.


def kernel(body):
    return (f"{HEAD}.visible .entry k(\n    .param .align 64 .b8 k_param_0[128],\n    .param .u64 k_param_1,\n"
            f"    .param .u64 k_param_2\n)\n{{\n    .reg .pred %p<8>;\n    .reg .b32 %r<40>;\n    .reg .b64 %rd<16>;\n"
            f"    .shared .align 1024 .b8 tbuf[1024];\n    .shared .align 8 .b64 mbar;\n{FRAME}{body}\n    ret;\n}}\n")


def run(body, ctas=1, interleavings=3, policy=None):
    tensor = np.arange(256, dtype=np.float32)
    out = np.zeros(64, np.uint32)
    src = kernel(body)
    launch = E.Launch("k", (ctas, 1, 1), (64, 1, 1), 0, (("tensormap", TMAP), ("buffer", 0, 0), ("buffer", 1, 0)))
    report = E.run_ptx(src, [launch], tensor, out, interleavings=interleavings, policy=policy)
    return report, src, tensor, out


ONE_AT_A_TIME = E.Policy(sm_count=1, ctas_per_sm=1)     # one CTA resident: the later CTA reports the race


def line_of(src, text):
    return next(k for k, t in enumerate(src.splitlines(), 1) if t.strip() == text.strip())


def races(report):
    return [f for f in report.findings if isinstance(f, F.DataRace)]


def assert_race(report, src, planted, copy, cta=None):
    """A DataRace at the planted line whose other side is the copy's line (``copy`` None: a read by another CTA,
    whose line the shadow does not keep)."""
    p, c = line_of(src, planted), line_of(src, copy) if copy else 0
    found = [f for f in races(report) if (f.where.ptx_line, f.other[1]) == (p, c)]
    assert found, f"no race at PTX line {p} with line {c}:\n{report}"
    if cta is not None:
        assert found[0].where.cta == cta, str(found[0])
    assert "global byte" in found[0].message
    return found[0]


# ---------------------------------------------------------------- TMA / bulk stores
FILL = """
    st.shared.u32 [%r22], %r1;
    fence.proxy.async.shared::cta;
    bar.sync 0;
"""
TMA_STORE = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd11, {%r32, %r33}], [%r20];"


def store_tile(between="", wait="cp.async.bulk.wait_group 0;"):
    return FILL + f"""
    @%p1 bra $STORED;
    {TMA_STORE}
    cp.async.bulk.commit_group;
    {between}
    {wait}
$STORED:
"""


READ_NEXT = "ld.global.u32 %r10, [%rd1+256];"


def test_a_tile_one_cta_tma_stores_read_by_another_cta_is_a_race_at_either_side_and_its_own_tile_is_not():
    read_first = "setp.ne.s32 %p4, %r2, 0;\n    @%p4 bra $R;\n    " + READ_NEXT + "\n$R:\n" + store_tile()
    report, src, _, _ = run(read_first, ctas=2, policy=ONE_AT_A_TIME)   # CTA 0 reads tile 1, then CTA 1 stores it
    f = assert_race(report, src, TMA_STORE, None, cta=(1, 0, 0))
    assert "CTAs of a launch are not ordered" in f.message and f.other[3] == "read"
    planted = "ld.global.u32 %r10, [%rd1];"
    read_after = store_tile() + "    bar.sync 0;\n    setp.ne.s32 %p4, %r1, 32;\n    @%p4 bra $R;\n    " + planted + \
        "\n$R:\n"
    report, src, _, _ = run(read_after, ctas=2, policy=ONE_AT_A_TIME)   # warp 1 reads tile 0: ordered in CTA 0,
    # not in CTA 1
    f = assert_race(report, src, planted, TMA_STORE, cta=(1, 0, 0))
    assert {fd.where.cta for fd in races(report)} == {(1, 0, 0)}, str(report)
    assert f.other[3] == "write" and "CTA (0, 0, 0) warp 0" in f.message
    own = store_tile() + "    @%p1 bra $R;\n    ld.global.u32 %r10, [%rd4+4];\n    mul.wide.u32 %rd13, %r2, 4;\n" \
        "    add.s64 %rd13, %rd2, %rd13;\n    st.global.u32 [%rd13], %r10;\n$R:\n"
    report, _, tensor, out = run(own, ctas=4)
    assert report.ok, str(report)
    np.testing.assert_array_equal(out[:4], 1)
    np.testing.assert_array_equal(tensor.view(np.uint32), np.tile(np.arange(64, dtype=np.uint32), 4))


READ_BACK = "ld.global.u32 %r10, [%rd4];"


def test_reading_back_a_tma_store_before_its_wait_group_is_a_race_and_after_it_is_not():
    for between, wait, racy in ((READ_BACK, "cp.async.bulk.wait_group 0;", True),
                                ("", "cp.async.bulk.wait_group.read 0;\n    " + READ_BACK, True),
                                ("", "cp.async.bulk.wait_group 0;\n    " + READ_BACK, False)):
        report, src, _, _ = run(store_tile(between, wait))
        if racy:
            f = assert_race(report, src, READ_BACK, TMA_STORE, cta=(0, 0, 0))
            assert "TMA store in flight" in f.message and "not .read" in f.message, f.message
        else:
            assert report.ok, str(report)


BULK_STORE = "cp.async.bulk.global.shared::cta.bulk_group [%rd4], [%r20], 256;"
WARP1_READ = "ld.global.u32 %r11, [%rd4+4];"


def test_a_bulk_store_read_by_another_warp_needs_the_full_wait_group_before_the_barrier():
    body = FILL + f"""
    @%p1 bra $STORED;
    {BULK_STORE}
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group{{read}} 0;
$STORED:
    bar.sync 0;
    setp.ne.s32 %p4, %r1, 32;
    @%p4 bra $R;
    {WARP1_READ}
$R:
"""
    report, src, _, _ = run(body.format(read=".read"))
    f = assert_race(report, src, WARP1_READ, BULK_STORE, cta=(0, 0, 0))
    assert f.where.warp == 1 and f.other[0] == 0
    report, _, _, _ = run(body.format(read=""))
    assert report.ok, str(report)


# ---------------------------------------------------------------- TMA loads and cp.async
TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r20], [%rd11, {%r32, %r33}], " \
           "[%r30];"
WRITE_TILE = "st.global.u32 [%rd4+8], %r1;"
WAIT = """
$WAIT{n}:
    mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 %p2, [%r30], 0, 0x989680;
    @!%p2 bra $WAIT{n};
"""


def tma_load(warp1_waits):
    return f"""
    @%p1 bra $INITED;
    mbarrier.init.shared.b64 [%r30], 1;
    fence.mbarrier_init.release.cluster;
$INITED:
    bar.sync 0;
    @%p1 bra $ISSUED;
    mbarrier.arrive.expect_tx.shared.b64 _, [%r30], 256;
    {TMA_LOAD}
$ISSUED:
    bar.sync 0;
    @%p3 bra $WARP1;
{WAIT.format(n=0)}
    ld.shared.u32 %r10, [%r22];
    st.global.u32 [%rd9], %r10;
    bra.uni $DONE;
$WARP1:
{WAIT.format(n=1) if warp1_waits else ""}
    {WRITE_TILE}
$DONE:
"""


def test_a_write_into_a_tile_a_tma_load_is_reading_is_a_race_unless_ordered_by_its_mbarrier():
    report, src, _, _ = run(tma_load(warp1_waits=False))
    f = assert_race(report, src, WRITE_TILE, TMA_LOAD, cta=(0, 0, 0))
    assert f.where.warp == 1 and f.other[:1] == (0,) and f.other[3] == "read", str(f)
    assert "complete-tx" in f.message, f.message
    report, _, tensor, out = run(tma_load(warp1_waits=True))
    assert report.ok, str(report)
    np.testing.assert_array_equal(out[:32].view(np.float32), np.arange(32, dtype=np.float32))   # loaded before
    assert 32 <= tensor.view(np.uint32)[2] < 64                                                 # the write


CP_ASYNC = "cp.async.cg.shared.global [%r24], [%rd6], 16;"
WRITE_SRC = "st.global.u32 [%rd7], %r1;"


def cp_async(wait_first):
    wait = "@!%p3 cp.async.wait_group 0;"
    return f"""
    shl.b32 %r23, %r1, 4;
    add.s32 %r24, %r20, %r23;
    cvt.u64.u32 %rd5, %r23;
    add.s64 %rd6, %rd1, %rd5;
    sub.s32 %r25, %r1, 32;
    mul.wide.u32 %rd8, %r25, 4;
    add.s64 %rd7, %rd1, %rd8;
    @%p3 bra $ISSUED;
    {CP_ASYNC}
    cp.async.commit_group;
$ISSUED:
    {wait if wait_first else ""}
    bar.sync 0;
    {"" if wait_first else wait}
    @!%p3 bra $DONE;
    {WRITE_SRC}
$DONE:
"""


def test_a_write_racing_a_cp_async_read_of_another_warp_is_found_until_the_issuers_wait():
    report, src, _, _ = run(cp_async(wait_first=False))
    f = assert_race(report, src, WRITE_SRC, CP_ASYNC, cta=(0, 0, 0))
    assert f.where.warp == 1 and f.other[0] == 0 and f.other[3] == "read", str(f)
    report, _, _, _ = run(cp_async(wait_first=True))
    assert report.ok, str(report)


def cp_async_arrive(warp1_waits):
    """Warp 0 copies with cp.async and arrives on the mbarrier when its copies land (no wait_group); warp 1,
    ordered after the issue by a barrier, writes the source after waiting on the mbarrier or not."""
    return f"""
    shl.b32 %r23, %r1, 4;
    add.s32 %r24, %r20, %r23;
    cvt.u64.u32 %rd5, %r23;
    add.s64 %rd6, %rd1, %rd5;
    sub.s32 %r25, %r1, 32;
    mul.wide.u32 %rd8, %r25, 4;
    add.s64 %rd7, %rd1, %rd8;
    @%p1 bra $INITED;
    mbarrier.init.shared.b64 [%r30], 32;
$INITED:
    bar.sync 0;
    @%p3 bra $ISSUED;
    {CP_ASYNC}
    cp.async.mbarrier.arrive.noinc.shared.b64 [%r30];
$ISSUED:
    bar.sync 0;
    @!%p3 bra $DONE;
{WAIT.format(n=1) if warp1_waits else ""}
    {WRITE_SRC}
$DONE:
"""


def test_a_cp_async_read_is_ordered_for_the_waiters_of_its_mbarrier_arrive():
    report, src, _, _ = run(cp_async_arrive(warp1_waits=False))
    f = assert_race(report, src, WRITE_SRC, CP_ASYNC, cta=(0, 0, 0))
    assert "cp.async in flight" in f.message, f.message
    report, _, _, _ = run(cp_async_arrive(warp1_waits=True))
    assert report.ok, str(report)


LOAD_BACK = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r26], [%rd11, {%r32, %r33}], " \
            "[%r30];"


def test_a_tma_load_of_a_tile_a_tma_store_may_still_be_writing_is_a_race_between_the_two_copies():
    body = """
    @%p1 bra $INITED;
    mbarrier.init.shared.b64 [%r30], 1;
    fence.mbarrier_init.release.cluster;
$INITED:
""" + FILL + f"""
    add.s32 %r26, %r20, 256;
    @%p1 bra $DONE;
    {TMA_STORE}
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group{{read}} 0;
    mbarrier.arrive.expect_tx.shared.b64 _, [%r30], 256;
    {LOAD_BACK}
{WAIT.format(n=0)}
    ld.shared.u32 %r10, [%r26+12];
    st.global.u32 [%rd2], %r10;
$DONE:
"""
    report, src, _, _ = run(body.replace("{read}", ".read"))
    f = assert_race(report, src, LOAD_BACK, TMA_STORE, cta=(0, 0, 0))
    assert "TMA store in flight" in f.message and f.where.warp == f.other[0] == 0, f.message
    report, _, _, out = run(body.replace("{read}", ""))
    assert report.ok and out[0] == 3, str(report)
