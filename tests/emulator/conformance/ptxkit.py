"""Helpers for the memory-model conformance tests: a PTX kernel skeleton and the ptxas check every
hand-written kernel passes (legal or broken, it must assemble: no finding is a parse error)."""
import os
import shutil
import subprocess
import tempfile

HEAD = ".version 8.0\n.target {arch}\n.address_size 64\n"
REGS = ("    .reg .pred %p<8>;\n    .reg .b16 %h<8>;\n    .reg .b32 %r<40>;\n    .reg .f32 %f<16>;\n"
        "    .reg .b64 %rd<32>;\n")


def kernel(body, nparams=2, name="k", arch="sm_80"):
    """A kernel whose parameters k_param_i are loaded into %rd1.. (%rd{i+1}); %r1 = %tid.x, %r2 = %ctaid.x."""
    params = ",\n".join(f"    .param .u64 k_param_{i}" for i in range(nparams))
    loads = "".join(f"    ld.param.u64 %rd{i + 1}, [k_param_{i}];\n" for i in range(nparams))
    return (f"{HEAD.format(arch=arch)}.visible .entry {name}(\n{params}\n)\n{{\n{REGS}{loads}"
            f"    mov.u32 %r1, %tid.x;\n    mov.u32 %r2, %ctaid.x;\n{body}\n    ret;\n}}\n")


def ptxas(ptx, arch="sm_80"):
    """ptxas's verdict on the PTX: (assembled, its messages), or None when ptxas is not installed.  The one
    ptxas call of the conformance tests."""
    if shutil.which("ptxas") is None:
        return None
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.ptx")
        with open(path, "w") as f:
            f.write(ptx)
        r = subprocess.run(["ptxas", f"-arch={arch}", path, "-o", os.path.join(d, "k.cubin")],
                           capture_output=True, text=True)
        return r.returncode == 0, r.stderr


def ptxas_accepts(ptx, arch="sm_80"):
    """Whether ptxas assembles the PTX (None when ptxas is not installed)."""
    verdict = ptxas(ptx, arch)
    return None if verdict is None else verdict[0]


def assert_assembles(ptx, arch="sm_80"):
    ok = ptxas_accepts(ptx, arch)
    assert ok is None or ok, f"ptxas refuses the test kernel:\n{ptx}"
