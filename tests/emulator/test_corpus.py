"""The frozen PTX corpus (make_corpus.py) and its opcode inventory stay in step."""
from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _make_corpus():
    spec = importlib.util.spec_from_file_location("make_corpus", HERE / "make_corpus.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_opcodes_txt_is_the_inventory_of_the_corpus():
    mc = _make_corpus()
    total = Counter()
    ptx = sorted((HERE / "corpus").glob("*.ptx"))
    assert {p.stem for p in ptx} == set(mc.KERNELS)  # one PTX file per kernel of the script, no stale ones
    for p in ptx:
        total += mc.opcode_forms(p.read_text())
    listed = {}
    for line in (HERE / "opcodes.txt").read_text().splitlines():
        form, n = line.split()
        listed[form] = int(n)
    assert listed == dict(total), "opcodes.txt is stale: python tests/emulator/make_corpus.py --inventory-only"
    assert list(listed) == sorted(listed)
    assert sum(p.stat().st_size for p in (HERE / "corpus").iterdir()) < 3_000_000


def test_opcode_forms_reads_guards_labels_and_inline_asm():
    text = """
.visible .entry k(
    .param .u64 k_param_0
)
.maxntid 128, 1, 1
{
    .reg .pred %p<3>;
    .loc 1 10 3
$L__BB0_1:
    @%p1 bra.uni $L__BB0_1;
    @!%p2 st.shared.v4.u32 [%r1], {%r2, %r3, %r4, %r5};
    // begin inline asm
    { .reg .pred ps0; setp.ne.b32 ps0, %r36, 0; wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%f1, %f2}, %rd6, %rd7, ps0, 1, 1, 0, 0; }
    {
    .reg .pred P1;
    LAB_WAIT:
    mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 P1, [%r9], %r10, 0x989680;
    @P1 bra DONE;
    bra LAB_WAIT;
    DONE:
    }
    ret;
}
    .section .debug_str
    {
$L__info_string0:
.b8 95,90,0
    }
"""
    assert _make_corpus().opcode_forms(text) == Counter({
        "bra.uni": 1, "st.shared.v4.u32": 1, "setp.ne.b32": 1,
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16": 1,
        "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64": 1, "bra": 2, "ret": 1})
