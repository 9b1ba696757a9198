"""Launch a cubin through the CUDA driver API with ctypes alone (GPU-machine side: no TVM, CuPy or cuda-python).

The GPU machine has torch and nvcc; torch makes the device's primary context current on first use, and
``libcuda.so.1`` (the driver, always there with a GPU) loads the cubin into it::

    launch = Launcher(cubin_bytes, "fa_forward_kernel", grid, block, dyn_smem)
    launch(pack_params(params, pointers, n), stream=torch.cuda.current_stream().cuda_stream)

``pack_params`` is the part that runs without a GPU (tests/bench/test_gpu_attention_run.py): a kernel's
parameters, in PTX order, as the manifest records them -- ``{"kind": "buffer", "arg": NAME}`` (a device
pointer) or ``{"kind": "scalar", "type": "s32", "value": V}`` with ``V`` an int or ``"n"`` (the KV length
of the call) -- become the ``void **kernelParams`` array ``cuLaunchKernel`` takes.
"""
from __future__ import annotations

import ctypes

__all__ = ["DriverError", "Launcher", "pack_params"]

#: PTX scalar type -> ctypes type of the kernel parameter.
SCALAR_TYPES = {"s32": ctypes.c_int32, "u32": ctypes.c_uint32, "s64": ctypes.c_int64, "u64": ctypes.c_uint64,
                "f32": ctypes.c_float, "f64": ctypes.c_double}
#: CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
_MAX_DYN_SMEM = 8


class DriverError(RuntimeError):
    """A CUDA driver call failed (its name and CUresult code)."""


class Packed:
    """The ``void **`` array of a launch and the ctypes values it points at (kept alive with it)."""

    def __init__(self, values: list):
        self.values = values
        self.array = (ctypes.c_void_p * len(values))(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p)
                                                        for v in values])


def pack_params(params: list, pointers: dict, n: int) -> Packed:
    """The kernel parameter array of one launch: ``params`` as the manifest lists them, ``pointers`` the
    device address of each named buffer, ``n`` the value of a scalar recorded as ``"n"``.  Raises KeyError
    (one line) for a buffer without a pointer or an unknown scalar type."""
    values = []
    for p in params:
        if p["kind"] == "buffer":
            if p["arg"] not in pointers:
                raise KeyError(f"no device pointer for kernel argument {p['arg']!r}")
            values.append(ctypes.c_void_p(int(pointers[p["arg"]]) + int(p.get("offset", 0))))
        elif p["kind"] == "scalar":
            if p["type"] not in SCALAR_TYPES:
                raise KeyError(f"scalar parameter type {p['type']!r} is not one of {sorted(SCALAR_TYPES)}")
            values.append(SCALAR_TYPES[p["type"]](n if p["value"] == "n" else p["value"]))
        else:
            raise KeyError(f"parameter kind {p['kind']!r} is not buffer or scalar")
    return Packed(values)


def _driver():
    lib = ctypes.CDLL("libcuda.so.1")
    for name in ("cuModuleLoadData", "cuModuleGetFunction", "cuFuncSetAttribute", "cuLaunchKernel",
                 "cuGetErrorString"):
        getattr(lib, name).restype = ctypes.c_int
    return lib


def _check(lib, res: int, what: str) -> None:
    if res:
        msg = ctypes.c_char_p()
        lib.cuGetErrorString(res, ctypes.byref(msg))
        raise DriverError(f"{what} failed: CUresult {res} ({(msg.value or b'?').decode()})")


class Launcher:
    """A kernel of a cubin, loaded into the current context, with its launch shape."""

    def __init__(self, cubin: bytes, kernel: str, grid, block, dyn_smem: int = 0):
        self.lib = lib = _driver()
        self._image = ctypes.create_string_buffer(cubin, len(cubin))
        self.module, self.fn = ctypes.c_void_p(), ctypes.c_void_p()
        _check(lib, lib.cuModuleLoadData(ctypes.byref(self.module), self._image), "cuModuleLoadData")
        _check(lib, lib.cuModuleGetFunction(ctypes.byref(self.fn), self.module, kernel.encode()),
               f"cuModuleGetFunction({kernel})")
        self.grid, self.block = (list(grid) + [1, 1])[:3], (list(block) + [1, 1])[:3]
        self.smem = int(dyn_smem)
        if self.smem > 48 * 1024:
            _check(lib, lib.cuFuncSetAttribute(self.fn, _MAX_DYN_SMEM, self.smem), "cuFuncSetAttribute")

    def __call__(self, packed: Packed, stream: int = 0) -> None:
        lib = self.lib
        _check(lib, lib.cuLaunchKernel(self.fn, *[ctypes.c_uint(x) for x in self.grid + self.block],
                                       ctypes.c_uint(self.smem), ctypes.c_void_p(stream), packed.array,
                                       ctypes.c_void_p(0)), "cuLaunchKernel")
