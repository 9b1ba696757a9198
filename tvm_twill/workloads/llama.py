"""A small Llama-class model, built with ``tvm.relax.frontend.nn``, lowered and scheduled by dlight.

The whole-model workload of ``plan_module`` (``bench/plan_model.py``): each
decoder layer is RMSNorm, the q / k / v / o projections as matmuls, causal-free
multi-head attention (two batched matmuls around a softmax), RMSNorm and a
SwiGLU MLP (gate, up, ``silu(gate) * up``, down); a final RMSNorm.  fp16
throughout, one sequence of ``seq`` tokens (a prefill).  ``scheduled_module``
lowers it with relax (``LegalizeOps``, operator fusion, ``FuseTIR``) and
schedules every PrimFunc with dlight's GPU rules for the arch: tensor-core
``Matmul`` first (which writes the software pipelines), then ``GEMV``,
``Reduction``, ``GeneralReduction`` and ``Fallback``.  Identical layers
lower to the same PrimFuncs (relax keeps one of each), so the number of
kernels does not grow with ``layers``.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError
from ..frontend.ir import dlight, relax_frontend, tvm
from ..frontend.target import dlight_arch  # dlight's arch for an sm_90a model: scheduled for sm_90

__all__ = ["LlamaConfig", "build_model", "dlight_arch", "lowered_module", "scheduled_module"]


@dataclass(frozen=True)
class LlamaConfig:
    """Sizes of the model: ``hidden`` = ``heads`` x head dim, ``ffn`` the MLP's inner width, ``seq`` tokens."""

    layers: int = 2
    hidden: int = 512
    heads: int = 8
    ffn: int = 1376
    seq: int = 128

    def __post_init__(self):
        for name in ("layers", "hidden", "heads", "ffn", "seq"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"LlamaConfig.{name} must be an int >= 1, got {v!r}")
        if self.hidden % self.heads:
            raise InputError(f"LlamaConfig: hidden ({self.hidden}) must be a multiple of heads ({self.heads})")


def build_model(cfg: LlamaConfig):
    """The ``nn.Module`` (weights are parameters: nothing is allocated)."""
    _, nn = relax_frontend()

    def linear(i, o):
        return nn.Linear(i, o, bias=False, dtype="float16")

    class RMSNorm(nn.Module):
        def __init__(self, d):
            self.weight = nn.Parameter((d,), dtype="float16")

        def forward(self, x):
            return nn.rms_norm(x, self.weight, axes=-1, epsilon=1e-5)

    class Layer(nn.Module):
        def __init__(self):
            d, f = cfg.hidden, cfg.ffn
            self.attn_norm, self.mlp_norm = RMSNorm(d), RMSNorm(d)
            self.q, self.k, self.v, self.o = linear(d, d), linear(d, d), linear(d, d), linear(d, d)
            self.gate, self.up, self.down = linear(d, f), linear(d, f), linear(f, d)

        def heads(self, t):  # (1, s, d) -> (1, h, s, d / h)
            return nn.permute_dims(nn.reshape(t, (1, cfg.seq, cfg.heads, cfg.hidden // cfg.heads)), [0, 2, 1, 3])

        def forward(self, x):
            h = self.attn_norm(x)
            q, k, v = self.heads(self.q(h)), self.heads(self.k(h)), self.heads(self.v(h))
            scores = nn.matmul(q, nn.permute_dims(k, [0, 1, 3, 2])) * (1.0 / (cfg.hidden // cfg.heads) ** 0.5)
            att = nn.matmul(nn.softmax(scores, axis=-1), v)
            x = x + self.o(nn.reshape(nn.permute_dims(att, [0, 2, 1, 3]), (1, cfg.seq, cfg.hidden)))
            h = self.mlp_norm(x)
            return x + self.down(nn.silu(self.gate(h)) * self.up(h))

    class Model(nn.Module):
        def __init__(self):
            self.layers = nn.ModuleList([Layer() for _ in range(cfg.layers)])
            self.norm = RMSNorm(cfg.hidden)

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return self.norm(x)

    return Model()


def lowered_module(cfg: LlamaConfig):
    """The model's IRModule after relax's lowering: a relax ``forward`` and one PrimFunc per fused op."""
    relax, nn = relax_frontend()
    mod, _ = build_model(cfg).export_tvm(spec={"forward": {"x": nn.spec.Tensor([1, cfg.seq, cfg.hidden],
                                                                              "float16")}})
    seq = tvm.transform.Sequential([relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(),
                                    relax.transform.FoldConstant(), relax.transform.FuseOps(),
                                    relax.transform.FuseTIR(), relax.transform.DeadCodeElimination()])
    return seq(mod)


def scheduled_module(cfg: LlamaConfig, arch: str = "sm_80", matmul_rule=None):
    """``lowered_module`` with every PrimFunc scheduled by dlight for ``dlight_arch(arch)`` (``matmul_rule``:
    the rule in the place of ``dl.gpu.Matmul()``, e.g. ``tvm_twill.integrations.dlight.AutoPipelined(dl.gpu.Matmul())``)."""
    dl = dlight()
    rules = [matmul_rule if matmul_rule is not None else dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.Reduction(),
             dl.gpu.GeneralReduction(), dl.gpu.Fallback()]
    with tvm.target.Target({"kind": "cuda", "arch": dlight_arch(arch)}):
        return dl.ApplyDefaultSchedule(*rules)(lowered_module(cfg))
