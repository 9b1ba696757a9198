"""Control flow: bra (divergent branches split the warp's thread group), ret/exit, trap; call is refused.

Control handlers take (warp, effective mask) and set the pc themselves.
"""
from __future__ import annotations

from ..errors import EmulationError
from . import findings as F


def compile_bra(ins, cc):
    target = ins.operands[0]
    if target.kind != "sym" or target.name not in cc.kernel.labels:
        raise EmulationError(f"unknown branch target in {ins.opcode} at PTX line {ins.line}")
    t = cc.kernel.labels[target.name]
    guarded = ins.guard is not None

    def run(w, m):
        if not guarded:
            w.pc = t
            return
        taken = m
        rest = w.mask & ~m
        if not taken.any():
            w.pc += 1
        elif not rest.any():
            w.pc = t
        else:
            w.groups.append([w.pc + 1, rest])
            w.mask = taken
            w.mask_all = False
            w.pc = t
        return
    return run


def compile_exit(ins, cc):
    launch = cc.launch

    def run(w, m):
        from .asyncops import pending_at_exit
        from .barrier import check_bars, unpark_on_exit
        from .regown import warp_exited
        from .wgmma import finish_wgmma
        w.live = w.live & ~m
        w.mask = w.mask & ~m
        w.mask_all = False
        w.pc += 1
        if not w.live.any():
            w.done = True
            pending_at_exit(launch.cta, w, ins)
            finish_wgmma(launch.cta, w)
            warp_exited(launch.cta, w, ins)
        else:
            unpark_on_exit(launch.cta, w)
        check_bars(launch.cta)
    return run


def compile_trap(ins, cc):
    launch = cc.launch

    def run(w, m):
        cta = launch.cta
        if m.any():
            cta.finding(F.Trap, w, ins, m, "trap executed: the kernel aborts")
            for u in cta.warps:
                u.done = True
            return 1
        w.pc += 1
        return None
    return run


def compile_call(ins, cc):
    raise EmulationError(f"unsupported opcode {ins.opcode} (calls to device functions) at PTX line {ins.line}")


HANDLERS = {"bra": compile_bra, "ret": compile_exit, "exit": compile_exit, "trap": compile_trap,
            "call": compile_call, "brkpt": compile_trap}
CONTROL = {"bra", "ret", "exit", "trap", "brkpt"}
