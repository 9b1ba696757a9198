"""What a module ``tvm.compile`` built for CUDA launches, without a GPU: its CUDA source, the PTX nvcc
makes of it, and every kernel launch its host code performs for given arguments.

How the launches are found (from ``f`` alone; no IRModule needed):

* ``f.mod`` is the host module (LLVM); its one import is the CUDA module.  TVM's binary serialization of
  that import (``runtime.ModulePackImportsToTensor``) holds, per kernel, the function info the CUDA
  runtime launches with: the argument types, the *launch parameter tags* (which trailing call arguments
  are ``blockIdx.x`` ... ``threadIdx.z`` extents and the dynamic shared memory size) and which arguments
  are tensor maps.  ``_kernel_infos`` reads it, and checks that the embedded source is the module's.
* The host code computes the grid, the block, the dynamic shared memory and the scalar kernel arguments
  from the argument shapes.  Rather than parse it, ``launches`` *runs* it: the host LLVM IR
  (``f.mod.inspect_source("ll")``) is loaded again as a fresh CPU module with no imports, and each
  packed-function name it looks up (each kernel, ``__tvm_set_device``, ``runtime.cuTensorMapEncodeTiled``)
  is renamed to a private one whose global stand-in hands the call to the recorder of the call in
  progress.  The arguments go in as DLPack tensors that claim to be on CUDA device 0 with fake, distinct
  data pointers (the host only reads shapes, strides and pointers; it never dereferences data), so each
  pointer a kernel receives names its argument and byte offset.  What the stand-ins receive is exactly
  what the CUDA runtime would launch with, in host-call order; the host's own checks (shapes, dtypes)
  run as they would on a GPU.  A host call to any other packed function is refused before the run.

The IRModule is not needed: ``launches(..., mod=...)`` is refused with one line.  The CUDA source does
not record its arch, so ``target=`` names it (``target_arch``: without it, sm_90a if the source uses
Hopper features, else sm_80).

``Launch.params`` lists the kernel's parameters in PTX order: ``("buffer", arg_index, byte_offset)`` for a
pointer into argument ``arg_index``, ``("scalar", ptx_type, value)`` (``ptx_type`` like ``"s32"``,
``"u64"``, ``"f32"``), and ``("tensormap", TensorMap)`` for a ``CUtensorMap`` parameter, with the
arguments the host passed to ``cuTensorMapEncodeTiled``.

``compile_ptx`` runs ``nvcc -ptx -lineinfo`` with a content-hash cache (``$TVM_TWILL_CACHE`` or
``~/.cache/tvm_twill``, folder ``ptx``).  TVM is imported lazily.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import struct
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from ..errors import EmulationError, InputError, ToolchainError
from .tensormap import TensorMap, from_encode_args

_DLPACK_DTYPE = {"int": 0, "uint": 1, "float": 2, "bfloat": 4, "bool": 6}
_PTX_SCALAR = {0: "s", 1: "u", 2: "f", 4: "b"}  # DLDataType code -> PTX type letter (bf16 passes as b16)
_HANDLE = 3
_THREAD_TAG = re.compile(r"^(blockIdx|threadIdx)\.([xyz])$")
_DYN_SMEM_TAGS = ("tirx.use_dyn_shared_memory", "tir.use_dyn_shared_memory")


@dataclass(frozen=True)
class Launch:
    """One kernel launch: the kernel's name (its ``.entry`` in the PTX), grid and block extents (x, y, z),
    the dynamic shared memory bytes and the parameters in PTX order (see the module docstring); whether it
    is a cooperative launch (``cudaLaunchCooperativeKernel``: all CTAs co-resident)."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dyn_smem: int
    params: tuple
    cooperative: bool = False       # a cooperative launch: every CTA is resident at once


@dataclass(frozen=True)
class _KernelInfo:
    name: str
    arg_types: tuple[tuple[int, int, int], ...]  # DLDataType (code, bits, lanes) per kernel argument
    tags: tuple[str, ...]  # launch parameter tags, the trailing call arguments
    tensor_map_args: frozenset[int]  # argument positions tagged as tensor maps


# --- source and PTX -------------------------------------------------------------------------------------

def _cuda_module(f):
    mod = getattr(f, "mod", f)
    if getattr(mod, "kind", None) == "cuda":
        return mod
    found = [m for m in getattr(mod, "imports", ()) if getattr(m, "kind", None) == "cuda"]
    if len(found) != 1:
        raise InputError(f"expected what tvm.compile returns for a CUDA target (one CUDA module among the "
                         f"imports), found {len(found)} CUDA modules: compile with target={{'kind': 'cuda', ...}}")
    return found[0]


def _host_module(f):
    """The host (LLVM) module of ``f``: what ``tvm.compile`` returned, or its ``.mod``."""
    host = getattr(f, "mod", f)
    if getattr(host, "kind", None) != "llvm":
        raise InputError(f"expected what tvm.compile returns for a CUDA target (an LLVM host module), got a "
                         f"{getattr(host, 'kind', type(host).__name__)} module: compile with target=cuda, host llvm")
    return host


def cuda_source_of(f) -> str:
    """The CUDA C++ source TVM generated for ``f`` (what ``tvm.compile`` returned for a CUDA target)."""
    return _cuda_module(f).inspect_source()


def cache_dir() -> Path:
    """Where compiled PTX is cached: ``$TVM_TWILL_CACHE/ptx``, else ``~/.cache/tvm_twill/ptx``."""
    root = os.environ.get("TVM_TWILL_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "tvm_twill") / "ptx"


#: Where nvcc is looked for when it is not on PATH.
_NVCC_FALLBACKS = ("/usr/local/cuda/bin/nvcc",)


def _nvcc() -> str:
    nvcc = shutil.which("nvcc") or next((p for p in _NVCC_FALLBACKS if Path(p).is_file()), None)
    if nvcc is None:
        raise ToolchainError("nvcc not found: install the CUDA toolkit (nvcc 12.8 or later) and put its bin/ on "
                             "PATH; the emulator runs the PTX nvcc makes of TVM's CUDA source")
    return nvcc


def compile_ptx(cuda_source: str, arch: str) -> str:
    """``nvcc -ptx -lineinfo -arch=<arch>`` of ``cuda_source``; cached by the hash of the source, the arch
    and nvcc's version line.  Raises ``ToolchainError`` when nvcc is missing or rejects the source."""
    if not re.fullmatch(r"sm_\d+[af]?", arch):
        raise InputError(f"arch {arch!r}: an nvcc arch such as 'sm_80' or 'sm_90a'")
    nvcc = _nvcc()
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    key = hashlib.sha256("\0".join((version.splitlines()[-1] if version else "", arch, cuda_source)).encode())
    path = cache_dir() / f"{key.hexdigest()[:32]}.ptx"
    if path.is_file():
        return path.read_text()
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "kernel.cu", Path(tmp) / "kernel.ptx"
        src.write_text(cuda_source)
        r = subprocess.run([nvcc, "-ptx", "-lineinfo", f"-arch={arch}", "-o", str(out), str(src)],
                           capture_output=True, text=True, check=False)
        if r.returncode:
            first = next((ln for ln in r.stderr.splitlines() if "error" in ln), r.stderr.strip()[:300])
            raise ToolchainError(f"nvcc -ptx -arch={arch} failed: {first.strip()}")
        ptx = out.read_text().replace(f'"{Path(tmp).resolve()}/', '"')  # .file names kernel.cu, not the folder
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp_path = path.with_suffix(f".{os.getpid()}.tmp")
    tmp_path.write_text(ptx)
    tmp_path.replace(path)  # atomic: concurrent writers leave one whole file
    return ptx


#: Source features that need sm_90a (the lowest arch with wgmma, TMA, setmaxnreg and elect.sync).
_SM90A_FEATURES = re.compile(r"wgmma|setmaxnreg|cp\.async\.bulk|elect\.sync|CUtensorMap|fence\.proxy\.async")


def target_arch(source: str, target=None) -> str:
    """The nvcc arch to compile ``source`` for: ``target``'s arch when given (a Target, a dict or a
    string); else the lowest arch whose features the source uses: sm_90a for wgmma, TMA, setmaxnreg or
    elect.sync, else sm_80 (the CUDA source does not record the arch it was generated for)."""
    if target is not None:
        import tvm

        t = target if isinstance(target, tvm.target.Target) else tvm.target.Target(target)
        arch = t.attrs.get("arch")
        if t.kind.name != "cuda" or not arch:
            raise InputError(f"target {t}: a CUDA target with an arch, e.g. {{'kind': 'cuda', 'arch': 'sm_80'}}")
        return str(arch)
    return "sm_90a" if _SM90A_FEATURES.search(source) else "sm_80"


# --- the kernels' function info, from the CUDA module's serialization -----------------------------------

class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def u64(self) -> int:
        (v,) = struct.unpack_from("<Q", self.data, self.pos)
        self.pos += 8
        return v

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("truncated")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def string(self) -> str:
        return self.raw(self.u64()).decode()

    def vector(self, item):
        return [item() for _ in range(self.u64())]


def _parse_cuda_blob(blob: bytes, source: str) -> dict[str, _KernelInfo]:
    r = _Reader(blob)
    fmt = r.string()
    infos = {}
    for _ in range(r.u64()):
        key = r.string()
        name = r.string()
        arg_types = tuple(struct.unpack("<BBH", r.raw(4)) for _ in range(r.u64()))
        tags = tuple(r.vector(r.string))
        extra = r.vector(lambda: struct.unpack("<i", r.raw(4))[0])
        if key != name or len(extra) != len(arg_types):
            raise ValueError(f"function info of {key!r} is inconsistent")
        infos[name] = _KernelInfo(name, arg_types, tags, frozenset(i for i, e in enumerate(extra) if e == 1))
    data = r.string()
    if r.pos != len(blob) or fmt != "cuda" or data != source:
        raise ValueError("unexpected layout")
    return infos


def _kernel_infos(f) -> dict[str, _KernelInfo]:
    """Kernel name -> function info, read from TVM's serialization of ``f``'s CUDA module."""
    import tvm_ffi

    host = _host_module(f)
    source = cuda_source_of(f)
    try:
        packed = bytes(tvm_ffi.get_global_func("runtime.ModulePackImportsToTensor")(host).numpy().tobytes())
        r = _Reader(packed)
        total = r.u64()
        r.vector(r.u64)  # import tree: row pointers
        r.vector(r.u64)  # import tree: children
        infos = {}
        while r.pos < 8 + total:
            kind = r.string()
            if kind == "_lib":
                continue
            blob = r.raw(r.u64())
            if kind == "cuda":
                infos.update(_parse_cuda_blob(blob, source))
        if not infos:
            raise ValueError("no CUDA module")
    except (ValueError, struct.error, UnicodeDecodeError, AttributeError) as e:
        raise InputError(f"cannot read the kernels' launch information from this module ({e}); it was not built "
                         f"by TVM 0.27's tvm.compile for CUDA") from None
    return infos


# --- running the host code on the CPU -------------------------------------------------------------------

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]


#: Fakes whose DLPack capsule a tensor still holds, by the address of their DLManagedTensor: the consumer
#: calls the deleter when its tensor dies, whatever the order Python frees things in.
_LIVE: dict[int, object] = {}
_RELEASE = _DELETER(lambda address: _LIVE.pop(address, None))
_CAPSULE_NEW = ctypes.pythonapi.PyCapsule_New
_CAPSULE_NEW.restype = ctypes.py_object
_CAPSULE_NEW.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
#: Fake device addresses: argument i's data starts at (i + 1) << _ARG_SHIFT (no real buffer is that large).
_ARG_SHIFT = 40
_CUDA = 2  # kDLCUDA


def _dl_dtype(dtype) -> tuple[int, int, int]:
    name = str(dtype)
    if name == "bool":
        return 6, 8, 1
    m = re.fullmatch(r"(bfloat|float|uint|int)(\d+)", name)
    if m is None:
        raise InputError(f"argument dtype {name}: the emulator takes int, uint, float, bfloat16 and bool arrays")
    return _DLPACK_DTYPE[m.group(1)], int(m.group(2)), 1


class _FakeCudaTensor:
    """A DLPack producer for argument ``index``: the array's shape and dtype, on CUDA device 0, data at the
    fake address ``(index + 1) << _ARG_SHIFT`` (the host code passes pointers on; it never dereferences).
    It stays alive (in ``_LIVE``) until the tensor made from it calls its deleter."""

    def __init__(self, index: int, array):
        self.shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
        t = _DLTensor(ctypes.c_void_p((index + 1) << _ARG_SHIFT), _DLDevice(_CUDA, 0), array.ndim,
                      _DLDataType(*_dl_dtype(array.dtype)), self.shape, None, 0)
        self.managed = _DLManagedTensor(t, None, _RELEASE)

    def __dlpack_device__(self):
        return _CUDA, 0

    def __dlpack__(self, **_):
        _LIVE[ctypes.addressof(self.managed)] = self  # until the consuming tensor calls the deleter
        return _CAPSULE_NEW(ctypes.addressof(self.managed), b"dltensor", None)


def _buffer_of(pointer: int, arrays: dict) -> tuple[int, int]:
    index, offset = (pointer >> _ARG_SHIFT) - 1, pointer & ((1 << _ARG_SHIFT) - 1)
    if index not in arrays:
        raise InputError(f"a kernel received the pointer {pointer:#x}, which is in no argument array")
    return index, offset


_INIT_FN = re.compile(r"^define internal i32 @__tvm_func_handle_init\.\S+\(.*?^}", re.MULTILINE | re.DOTALL)
_STR_USE = re.compile(r"@(\.str[\w.]*)")
_ENCODE = "runtime.cuTensorMapEncodeTiled"
_SET_DEVICE = "__tvm_set_device"
#: The private names the host's lookups are renamed to.  Their stand-ins are registered once and never
#: removed (a Python callback the registry drops would be freed by a C++ exit handler after Python is
#: gone); they act for the recorder of the host call in progress on this thread.
_PRIVATE_PREFIX = "__tvm_twill_emulator."
_ACTIVE = threading.local()


def _llvm_string(ir: str, symbol: str) -> tuple[re.Match, str]:
    m = re.search(rf'^@{re.escape(symbol)} = (.*?)constant \[(\d+) x i8\] c"((?:[^"\\]|\\[0-9A-Fa-f]{{2}})*)"',
                  ir, re.MULTILINE)
    if m is None:
        raise InputError(f"the host code's lookup string {symbol} is not a plain constant: not a TVM 0.27 module")
    text = re.sub(r"\\([0-9A-Fa-f]{2})", lambda e: chr(int(e.group(1), 16)), m.group(3))
    return m, text.rstrip("\0")


def _private_lookups(ir: str) -> tuple[str, dict[str, str]]:
    """The host IR with every packed-function lookup renamed to a private name; private -> original."""
    renames, edits, seen = {}, [], set()
    for fn in _INIT_FN.finditer(ir):
        symbols = set(_STR_USE.findall(fn.group(0)))
        if len(symbols) != 1:
            raise InputError("a host function-handle initializer of an unexpected form: not a TVM 0.27 module")
        symbol = symbols.pop()
        if symbol in seen:
            continue
        seen.add(symbol)
        m, name = _llvm_string(ir, symbol)
        private = _PRIVATE_PREFIX + name
        renames[private] = name
        edits.append((m.start(2), m.end(), f'{len(private) + 1} x i8] c"{private}\\00"'))
    for start, end, text in sorted(edits, reverse=True):
        ir = ir[:start] + text + ir[end:]
    return ir, renames


def _pointer(value) -> int:
    return int(getattr(value, "value", value) or 0)


class _Recorder:
    """The stand-ins for the host's packed calls: kernels append a ``Launch``, encodes keep a ``TensorMap``
    by the address of the map they fill, ``__tvm_set_device`` checks the device."""

    def __init__(self, infos: dict, arrays: dict):
        self.infos, self.arrays = infos, arrays
        self.launches: list[Launch] = []
        self.maps: dict[int, TensorMap] = {}
        self.error = None   # the InputError / EmulationError a stand-in raised

    def set_device(self, device_type, device_id):
        if (int(device_type), int(device_id)) != (_CUDA, 0):
            raise InputError(f"the host selects device ({device_type}, {device_id}); the emulator is CUDA device 0")

    def encode(self, *a):
        self.maps[_pointer(a[0])] = from_encode_args(str(a[1]), int(a[2]), _buffer_of(_pointer(a[3]), self.arrays),
                                                     [int(x) for x in a[4:]])

    def kernel(self, name: str, values) -> None:
        info = self.infos[name]
        n = len(info.arg_types)
        if len(values) != n + len(info.tags):
            raise InputError(f"the host launches {name} with {len(values)} values, its function info says "
                             f"{n} arguments + {len(info.tags)} launch parameters")
        params = []
        for i, ((code, bits, _), v) in enumerate(zip(info.arg_types, values[:n])):
            if i in info.tensor_map_args:
                if _pointer(v) not in self.maps:
                    raise InputError(f"{name}: tensor-map argument {i} was never encoded by the host code")
                params.append(("tensormap", self.maps[_pointer(v)]))
            elif code == _HANDLE:
                params.append(("buffer", *_buffer_of(_pointer(v), self.arrays)))
            elif code in _PTX_SCALAR:
                params.append(("scalar", f"{_PTX_SCALAR[code]}{bits}", v))
            else:
                raise InputError(f"{name}: argument {i} has DLPack type code {code}, which no PTX parameter has")
        dims, smem = {"blockIdx": [1, 1, 1], "threadIdx": [1, 1, 1]}, 0
        for tag, v in zip(info.tags, values[n:]):
            m = _THREAD_TAG.match(tag)
            if m:
                dims[m.group(1)]["xyz".index(m.group(2))] = int(v)
            elif tag in _DYN_SMEM_TAGS:
                smem = int(v)
            elif tag.startswith("clusterCtaIdx"):
                raise EmulationError(f"{name} is launched in thread-block clusters ({tag} = {int(v)}): the "
                                     "emulator runs one CTA at a time and does not model clusters")
            else:
                raise InputError(f"{name}: launch parameter tag {tag!r} is not a thread extent or dynamic "
                                 f"shared memory; the emulator does not launch it")
        self.launches.append(Launch(name, tuple(dims["blockIdx"]), tuple(dims["threadIdx"]), smem, tuple(params)))


def _entry(ir: str) -> str:
    names = re.findall(r"^define dllexport i32 @__tvm_ffi_([\w.$]+)\(", ir, re.MULTILINE)
    if len(names) != 1:
        raise InputError(f"the host module exports {len(names)} functions ({', '.join(names)}); the emulator "
                         f"runs modules with one entry function")
    return names[0]


def _host_args(args) -> tuple[list, dict]:
    """The host call's arguments (fake CUDA tensors for arrays, ints as they are) and the arrays by
    position."""
    import numpy as np
    import tvm_ffi

    call, arrays = [], {}
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray):
            if not a.flags.c_contiguous:
                raise InputError(f"argument {i} is not a C-contiguous array (TVM's kernels index compact "
                                 f"buffers): pass np.ascontiguousarray(...) and copy results back")
            arrays[i] = a
            call.append(tvm_ffi.from_dlpack(_FakeCudaTensor(i, a)))
        elif isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer, float, np.floating)):
            raise InputError(f"argument {i} is a {type(a).__name__}: pass numpy arrays, ints (symbolic shapes) "
                             f"and floats")
        else:
            call.append(a.item() if hasattr(a, "item") else a)
    return call, arrays


def launches(f, args, *, mod=None, target=None, source=None) -> tuple[str, list[Launch]]:
    """The PTX of ``f``'s kernels (of ``source`` instead, when given: CUDA text with the same kernels and
    parameters, for fault injection) and, in host-call order, every launch ``f``'s host code performs
    for ``args`` (numpy arrays and ints, in the function's parameter order).  ``target`` names the arch
    nvcc compiles for (see ``target_arch``).  ``mod`` is not needed: the launches come from ``f``."""
    import tvm
    import tvm_ffi

    if mod is not None:
        raise InputError("mod= is not needed: the launch parameters are read from the compiled module itself")
    infos = _kernel_infos(f)
    src = cuda_source_of(f) if source is None else source
    ptx = compile_ptx(src, target_arch(src, target))
    ir, renames = _private_lookups(_host_module(f).inspect_source("ll"))
    unknown = sorted(set(renames.values()) - set(infos) - {_ENCODE, _SET_DEVICE})
    if unknown:
        raise InputError(f"the host code calls {unknown[0]}, which the emulator does not provide")
    call, arrays = _host_args(args)
    rec = _Recorder(infos, arrays)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "host.ll"
        path.write_text(ir)
        host = tvm.runtime.load_module(str(path))
    for private, name in renames.items():
        if tvm_ffi.get_global_func(private, allow_missing=True) is None:
            tvm_ffi.register_global_func(private, lambda *v, _n=name: _stand_in(_n, v))
    _ACTIVE.recorder = rec
    try:
        host[_entry(ir)](*call)
    except (ValueError, TypeError, RuntimeError) as e:
        if rec.error is not None:
            raise rec.error from None
        if isinstance(e, InputError):
            raise
        raise InputError(f"the host code refused the arguments: {str(e).splitlines()[0]}") from None
    finally:
        _ACTIVE.recorder = None
    return ptx, rec.launches


def _stand_in(name: str, values):
    rec = getattr(_ACTIVE, "recorder", None)
    if rec is None:
        raise InputError(f"{_PRIVATE_PREFIX}{name} called outside tvm_twill.emulator.launch.launches")
    try:
        if name == _ENCODE:
            return rec.encode(*values)
        if name == _SET_DEVICE:
            return rec.set_device(*values)
        return rec.kernel(name, values)
    except (InputError, EmulationError) as e:
        rec.error = e       # raised again as it is once the host call unwinds (the FFI converts it on the way)
        raise
