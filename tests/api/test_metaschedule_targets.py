"""``tune_context(mod, arch)`` for every arch tvm_twill models: a full CUDA target (threads, warp, registers and
shared memory per block, L2) from the machine model, the limits of TVM's own tags where TVM has one (sm_80,
sm_90a); a Target that states some limits keeps them and gets the others."""
import pytest

tvm = pytest.importorskip("tvm")

from tvm_twill.frontend import machine_for  # noqa: E402
from tvm_twill.integrations.metaschedule import sample_candidates, tune_context  # noqa: E402
from tvm_twill.model.machine import ARCH_MACHINES  # noqa: E402

ARCHS = [f"sm_{cc}{suffix}" for cc, (_, suffixes) in ARCH_MACHINES.items() for suffix in suffixes]
LIMITS = ("max_num_threads", "max_threads_per_block", "thread_warp_size", "registers_per_block",
          "max_shared_memory_per_block", "l2_cache_size_bytes")


def _matmul(n=128):
    from tvm import te
    a = te.placeholder((n, n), "float16", name="A")
    b = te.placeholder((n, n), "float16", name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k].astype("float32") * b[k, j].astype("float32"), axis=k),
                   name="C")
    return te.create_prim_func([a, b, c])


def _limits(target) -> dict:
    return {k: int(target.attrs[k]) for k in LIMITS if k in target.attrs}


def test_every_modelled_arch_gets_a_full_target_from_its_machine_model():
    assert {"sm_86", "sm_89", "sm_90", "sm_100a", "sm_120"} <= set(ARCHS)
    for arch in ARCHS:
        ctx = tune_context(_matmul(), arch)
        assert str(ctx.target.attrs["arch"]) == arch and ctx.target.kind.name == "cuda"
        chip = machine_for(arch).costs.chip  # the figures of the part the arch is modelled on
        assert _limits(ctx.target) == {"max_num_threads": 1024, "max_threads_per_block": 1024, "thread_warp_size": 32,
                                       "registers_per_block": chip.regs_per_sm, "l2_cache_size_bytes": chip.l2_bytes,
                                       "max_shared_memory_per_block": 48 * 1024}, arch  # static __shared__: 48 KiB


@pytest.mark.parametrize("tag", ["nvidia/nvidia-a100", "nvidia/nvidia-h100"])
def test_the_model_gives_the_limits_of_tvms_tags(tag):
    from tvm_twill.integrations.metaschedule import tuning_limits
    t = tvm.target.Target(tag)
    assert tuning_limits(str(t.attrs["arch"])) == _limits(t)
    assert _limits(tune_context(_matmul(), tag).target) == _limits(t)


def test_an_arch_without_a_tag_tunes():
    ctx = tune_context(_matmul(), "sm_86")
    assert len(sample_candidates(ctx, 2)) == 2


def test_a_target_keeps_the_limits_it_states():
    t = tvm.target.Target({"kind": "cuda", "arch": "sm_89", "max_shared_memory_per_block": 32768})
    got = _limits(tune_context(_matmul(), t).target)
    assert got["max_shared_memory_per_block"] == 32768 and got["max_threads_per_block"] == 1024
    assert got["l2_cache_size_bytes"] == machine_for("sm_89").costs.chip.l2_bytes
