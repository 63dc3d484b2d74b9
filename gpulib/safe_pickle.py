"""Unpickle checkpoint pickles with inert stand-ins: nothing is imported, resolved or called.

Why: ``torch.load(weights_only=False)`` and ``pickle.load`` execute whatever callable a pickle
names (``os.system``, ``builtins.eval``, ...). Denylist scanners keep being bypassed (memo tricks,
STACK_GLOBAL, BUILD injection, alternative primitives). Here ``find_class`` never imports: every
global becomes a fresh stand-in class that records its arguments and state, so REDUCE/NEWOBJ/
BUILD on it are harmless; tensors become :class:`TensorInfo` (name, dtype, shape, storage) and
persistent ids become :class:`StorageRef` descriptors - no tensor byte is ever read.

Every global the pickle names is recorded and classified (``classify_global``) so the report can
say *why* a file is dangerous, or which ``torch.serialization.add_safe_globals`` entries a
``weights_only=True`` load would need.

Memory: a few bytes of pickle can ask for hundreds (an empty dict is 1 byte of pickle and ~80 bytes
of Python; a 10 MB pickle of them took 837 MB). Every unpickling runs under a :class:`Budget`
(:func:`memory_budget`: 4x the file, at least 64 MiB, at most 512 MiB): the opcode scan charges
what the C unpickler will allocate for each opcode (an upper bound, calibrated with tracemalloc)
and refuses the pickle before unpickling when the sum is over; the stand-ins charge what they copy
(``set(list)``, ``bytearray(bytes)``, ...) while it runs; the walk of the result charges its entries.
docs/CHECKPOINT_THREAT_MODEL.md says what each format unpickles and how each pickle is judged.
"""

from __future__ import annotations

import collections
import io
import os
import pickle
import struct

from gpulib.pickle_ops import OPCODES, walk

MAX_PICKLE_BYTES = 256 << 20
MEMORY_FACTOR = 4
MEMORY_FLOOR = 64 << 20
MEMORY_CAP = 512 << 20


def memory_budget(file_bytes: int) -> int:
    """Bytes the stub may allocate for the pickles of one file of ``file_bytes``: 4x the file, at
    least 64 MiB (a small file of many tiny tensors is mostly pickle, and the scan's bound is
    cautious), at most 512 MiB (a GB checkpoint's pickle is a few MB of objects)."""
    return min(MEMORY_CAP, max(MEMORY_FLOOR, MEMORY_FACTOR * max(0, file_bytes)))


class BudgetExceeded(pickle.UnpicklingError):
    """The pickle needs more memory than its :class:`Budget` allows (a memory bomb, or a pickle far
    larger than any checkpoint's)."""


class Budget:
    """What unpickling one file may allocate, and what it has been charged so far (bytes). Shared by
    every pickle of the file (the objects of all of them stay alive together)."""

    __slots__ = ("limit", "used")

    def __init__(self, limit: int) -> None:
        self.limit, self.used = limit, 0

    def charge(self, nbytes: int, what: str) -> None:
        self.used += nbytes
        if self.used > self.limit:
            raise BudgetExceeded(f"{what} would take the memory used past the budget of {self.limit >> 20} MiB "
                                 "(a memory bomb, or a pickle far larger than a checkpoint's)")


#: The budget of the unpickling in progress (stub_load sets it: the stand-ins charge their copies to it).
_ACTIVE: list[Budget] = []


def _charge(nbytes: int, what: str) -> None:
    if _ACTIVE:
        _ACTIVE[-1].charge(nbytes, what)

# torch storage classes -> (dtype, bytes per element); UntypedStorage counts bytes.
STORAGE_TYPES = {
    "FloatStorage": ("float32", 4), "DoubleStorage": ("float64", 8), "HalfStorage": ("float16", 2),
    "BFloat16Storage": ("bfloat16", 2), "LongStorage": ("int64", 8), "IntStorage": ("int32", 4),
    "ShortStorage": ("int16", 2), "CharStorage": ("int8", 1), "ByteStorage": ("uint8", 1),
    "BoolStorage": ("bool", 1), "ComplexFloatStorage": ("complex64", 8),
    "ComplexDoubleStorage": ("complex128", 16), "QInt32Storage": ("qint32", 4),
    "QInt8Storage": ("qint8", 1), "QUInt8Storage": ("quint8", 1), "QUInt4x2Storage": ("quint4x2", 1),
    "QUInt2x4Storage": ("quint2x4", 1), "UntypedStorage": ("uint8", 1), "Storage": ("float32", 4),
}
# torch dtype attribute names -> bytes per element (sub-byte types round up to one byte per element).
DTYPE_BYTES = {
    "float32": 4, "float": 4, "float64": 8, "double": 8, "float16": 2, "half": 2, "bfloat16": 2,
    "int64": 8, "long": 8, "int32": 4, "int": 4, "int16": 2, "short": 2, "int8": 1, "uint8": 1,
    "uint16": 2, "uint32": 4, "uint64": 8, "bool": 1, "complex64": 8, "cfloat": 8, "complex128": 16,
    "cdouble": 16, "complex32": 4, "chalf": 4, "qint8": 1, "quint8": 1, "qint32": 4, "quint4x2": 1,
    "quint2x4": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1,
    "float8_e8m0fnu": 1, "float4_e2m1fn_x2": 1, "bits8": 1, "bits16": 2, "bits1x8": 1, "bits2x4": 1,
    "bits4x2": 1, **{f"uint{n}": 1 for n in range(1, 8)}, **{f"int{n}": 1 for n in range(1, 8)},
}

# --- classification of globals -------------------------------------------------------------
# Policy: an ALLOWLIST decides what is safe; the denylist only explains *why* a name is dangerous.
# A global that is on neither list is "needs_review": it may be a gadget no scanner knows yet (the
# published bypasses of picklescan/fickling/modelscan are exactly such names), so it is never
# advised for ``add_safe_globals`` and a checkpoint naming it is never recommended for resume.
#
# Modules whose every name can run code, touch files or the network (picklescan, modelscan and
# fickling denylists merged, plus their published bypasses).
DANGEROUS_MODULES = frozenset("""
os posix nt subprocess sys runpy pty shutil socket ssl asyncio ctypes _ctypes multiprocessing
_posixsubprocess code codeop marshal importlib _imp imp pkgutil zipimport pickle _pickle dill
cloudpickle joblib bdb pdb cProfile profile timeit trace pydoc webbrowser httplib http requests
urllib urllib2 aiohttp smtplib ftplib telnetlib xmlrpc venv ensurepip pip idlelib lib2to3 signal
_thread threading atexit tempfile distutils commands platform types doctest _interpreters
functools shelve dbm sqlite3 site sysconfig glob zipfile tarfile cffi IPython jinja2 setuptools
""".split())
# Sub-trees of otherwise harmless packages that hold eval/exec/file gadgets.
DANGEROUS_PREFIXES = (
    "numpy.f2py", "numpy.distutils", "numpy.testing", "numpy.lib.npyio", "numpy.lib._npyio_impl",
    "torch._dynamo", "torch._inductor", "torch.fx", "torch.jit", "torch.package", "torch.hub",
    "torch.utils.cpp_extension", "torch.utils.collect_env", "torch.distributed.rpc", "torch.testing",
    "torch._export", "torch.export", "torch.onnx", "pandas.io", "scipy.weave",
)
DANGEROUS_NAMES = frozenset({
    ("builtins", n) for n in ("eval", "exec", "compile", "getattr", "setattr", "delattr", "open",
                              "breakpoint", "__import__", "apply", "input", "globals", "locals", "vars")
} | {("__builtin__", n) for n in ("eval", "exec", "compile", "getattr", "open", "apply", "__import__")} | {
    ("operator", "attrgetter"), ("operator", "itemgetter"), ("operator", "methodcaller"),
    ("_operator", "attrgetter"), ("_operator", "itemgetter"), ("_operator", "methodcaller"),
    ("_io", "FileIO"), ("io", "FileIO"), ("_io", "open"), ("io", "open"), ("logging", "FileHandler"),
    ("torch", "load"), ("torch.serialization", "load"), ("torch.storage", "_load_from_bytes"),
    ("numpy", "load"), ("numpy", "fromfile"), ("numpy", "loadtxt"), ("numpy", "genfromtxt"),
    ("torch", "from_file"), ("torch.utils.data.datapipes.utils.decoder", "basichandlers"),
})
# Plain data constructors from builtins (protocol 0/1 pickles and copyreg use them); every other
# builtins name is treated as dangerous.
DATA_BUILTINS = frozenset("""
set frozenset complex bytearray slice dict list tuple int float str bytes bool object range
""".split())
# Globals that ``torch.load(weights_only=True)`` accepts by default (plus every torch dtype and
# storage class, handled by prefix below).
WEIGHTS_ONLY_DEFAULT = frozenset({
    ("collections", "OrderedDict"), ("collections", "Counter"), ("torch.nn.parameter", "Parameter"),
    ("torch.serialization", "_get_layout"), ("torch", "Size"), ("torch", "Tensor"), ("torch", "device"),
    ("_codecs", "encode"), ("builtins", "bytearray"), ("builtins", "set"), ("builtins", "complex"),
    ("torch._tensor", "_rebuild_from_type_v2"),
})
# Known data-only types that torch refuses by default but that cannot run code when rebuilt
# (constructor + BUILD of plain state): safe to pass to ``torch.serialization.add_safe_globals``.
ALLOWLISTABLE = frozenset({
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("numpy", "ndarray"), ("numpy", "dtype"), ("argparse", "Namespace"), ("collections", "defaultdict"),
    ("datetime", "datetime"), ("datetime", "date"), ("datetime", "timedelta"), ("datetime", "timezone"),
    ("pathlib", "PosixPath"), ("pathlib", "PurePosixPath"), ("pathlib", "WindowsPath"),
    ("pathlib._local", "PosixPath"), ("decimal", "Decimal"), ("uuid", "UUID"),
})
# numpy dtype codes (as pickled in ``numpy.dtype(code, ...)``) -> the numpy.dtypes class that
# ``weights_only`` needs allowlisted as well (it checks the class of the rebuilt dtype).
NUMPY_DTYPE_CLASSES = {
    "b1": "BoolDType", "i1": "Int8DType", "u1": "UInt8DType", "i2": "Int16DType", "u2": "UInt16DType",
    "i4": "Int32DType", "u4": "UInt32DType", "i8": "Int64DType", "u8": "UInt64DType", "f2": "Float16DType",
    "f4": "Float32DType", "f8": "Float64DType", "c8": "Complex64DType", "c16": "Complex128DType",
}
# Data classes that a framework's own loader unpickles (DCP reads ``.metadata`` with plain pickle):
# classes (CamelCase names) of these exact modules; never their functions.
FRAMEWORK_DATA_MODULES = frozenset({
    "torch.distributed.checkpoint.metadata", "torch.distributed.checkpoint.filesystem",
    "torch.distributed.checkpoint.planner", "torch.distributed.checkpoint._extension",
    "torch.distributed._shard.sharded_tensor.metadata", "torch.distributed._shard.metadata",
    "torch.distributed.checkpoint._dedup_save_plans",
})
# Exact data classes/enums that frameworks pickle into their own checkpoint files (seen in real
# saves; their loaders read them back with weights_only=False).
FRAMEWORK_DATA_NAMES = frozenset({
    ("deepspeed.runtime.fp16.loss_scaler", "LossScaler"), ("deepspeed.runtime.fp16.loss_scaler", "DynamicLossScaler"),
    ("deepspeed.runtime.zero.config", "ZeroStageEnum"), ("deepspeed.utils.tensor_fragment", "fragment_address"),
})
NESTED_PICKLE_LOADERS = frozenset({("pickle", "loads"), ("_pickle", "loads"), ("torch.storage", "_load_from_bytes"),
                                   ("dill", "loads"), ("cloudpickle", "loads")})


def classify_global(module: str, name: str) -> tuple[str, str]:
    """('dangerous'|'needs_review'|'needs_allowlist'|'framework_data'|'weights_only_ok', why)."""
    top = module.split(".")[0]
    if (module, name) in DANGEROUS_NAMES:
        return "dangerous", f"{module}.{name} can run code or touch files when unpickled"
    if top in DANGEROUS_MODULES or module in DANGEROUS_MODULES:
        return "dangerous", f"module {module} (denylisted by picklescan/fickling/modelscan: code execution, files, network)"
    if any(module == p or module.startswith(p + ".") for p in DANGEROUS_PREFIXES):
        return "dangerous", f"module {module} holds known eval/exec/file gadgets (published scanner bypasses)"
    if top in ("builtins", "__builtin__") and name not in DATA_BUILTINS:
        return "dangerous", f"builtins.{name} is not a plain data constructor"
    if (module, name) in WEIGHTS_ONLY_DEFAULT:
        return "weights_only_ok", "in torch's weights_only allowlist"
    if module == "torch._utils" and name.startswith("_rebuild_"):
        return "weights_only_ok", "tensor rebuild function"
    if module in ("torch", "torch.storage", "torch.cuda") and (name in DTYPE_BYTES or name.endswith("Storage")):
        return "weights_only_ok", "torch dtype / storage class"
    if module.startswith("torch.") and "quantiz" in module + name:
        return "weights_only_ok", "quantization scheme"
    if (module in FRAMEWORK_DATA_MODULES and name.lstrip("_")[:1].isupper()) or (module, name) in FRAMEWORK_DATA_NAMES:
        return "framework_data", "a data class of the framework's own checkpoint metadata"
    if (top in ("builtins", "__builtin__") or (module, name) in ALLOWLISTABLE
            or (module == "numpy.dtypes" and name in NUMPY_DTYPE_CLASSES.values())):
        return "needs_allowlist", "plain data type: torch.load(weights_only=True) refuses it until allowlisted"
    return "needs_review", ("not known to gpulib as safe: it may run code when unpickled (review the code of "
                            f"{module}.{name} before loading this file; never allowlist it blindly)")


# --- stand-in values -----------------------------------------------------------------------

# Plain classes with __slots__, not dataclasses: `gpulib ckpt inspect` imports this module on every
# start, and `dataclasses` (with `inspect`, `ast`, `dis` behind it) would cost a sixth of its time.
class StorageType:
    """Stand-in for ``torch.FloatStorage`` & co.: the element type a legacy storage holds."""

    __slots__ = ("name", "dtype", "itemsize")

    def __init__(self, name: str, dtype: str, itemsize: int) -> None:
        self.name, self.dtype, self.itemsize = name, dtype, itemsize


class DType:
    """Stand-in for a ``torch.float32``-like dtype global."""

    __slots__ = ("name", "itemsize")

    def __init__(self, name: str, itemsize: int) -> None:
        self.name, self.itemsize = name, itemsize


class StorageRef:
    """A tensor storage named by the pickle; the bytes live in ``data/<key>`` (zip) or after the
    pickles (legacy). ``numel`` is in elements of ``storage_type`` (bytes for UntypedStorage)."""

    __slots__ = ("key", "storage_type", "dtype", "itemsize", "location", "numel")

    def __init__(self, key: str, storage_type: str, dtype: str, itemsize: int, location: str, numel: int) -> None:
        self.key, self.storage_type, self.dtype, self.itemsize = key, storage_type, dtype, itemsize
        self.location, self.numel = location, numel

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize


class TensorInfo:
    """Stand-in for a tensor: where its bytes are and how they are laid out (never loaded)."""

    __slots__ = ("storage", "offset", "shape", "stride", "dtype", "requires_grad", "kind")

    def __init__(self, storage: StorageRef | None, offset: int, shape: tuple, stride: tuple, dtype: str,
                 requires_grad: bool = False, kind: str = "tensor") -> None:
        self.storage, self.offset, self.shape, self.stride, self.dtype = storage, offset, shape, stride, dtype
        self.requires_grad = requires_grad
        self.kind = kind  # tensor | parameter | qtensor | meta | subclass

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d if isinstance(d, int) else 0
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPE_BYTES.get(self.dtype, 1)


class NDArrayInfo:
    """A numpy array (e.g. the MT19937 key of ``np.random.get_state()``), never materialised."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: tuple = (), dtype: str = "?") -> None:
        self.shape, self.dtype = shape, dtype


class _RefuseOnClass:
    """``__setstate__`` that works on instances but raises on the stand-in class itself: BUILD
    on a *global* is the attribute-injection trick (modelscan#85)."""

    def __init__(self, func):
        self.func = func

    def __get__(self, instance, owner):
        if instance is None:
            def refuse(_state):
                raise pickle.UnpicklingError(f"BUILD on the global {owner._module}.{owner._name} refused (attribute injection)")
            return refuse
        return self.func.__get__(instance, owner)


class Opaque:
    """Stand-in for any global: calling it (REDUCE/NEWOBJ/INST/OBJ) records the arguments; BUILD,
    SETITEMS and APPENDS record state, items and list entries. It never does anything else."""

    _module = "?"
    _name = "?"

    def __new__(cls, *args, **kwargs):
        obj = object.__new__(cls)
        obj.args, obj.kwargs, obj.state, obj.items, obj.list = args, kwargs, None, {}, []
        return obj

    def __init__(self, *args, **kwargs):
        pass

    @_RefuseOnClass
    def __setstate__(self, state):
        self.state = state

    def __setitem__(self, key, value):
        self.items[key] = value

    def append(self, value):
        self.list.append(value)

    def extend(self, values):
        self.list.extend(values)

    @property
    def qualname(self) -> str:
        return f"{self._module}.{self._name}"

    def attrs(self) -> dict:
        """The object's attributes as pickled (dict state, or the dict half of (dict, slots))."""
        state = self.state
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict):
            merged = dict(state[0] or {}) if isinstance(state[0], dict) else {}
            merged.update(state[1])
            return merged
        return state if isinstance(state, dict) else {}

    def __repr__(self) -> str:
        return f"<{self.qualname}>"


def _stand_in(module: str, name: str, base: type = Opaque) -> type:
    return type(name if name.isidentifier() else "Global", (base,), {"_module": module, "_name": name})


def _rebuild_tensor(storage, storage_offset, size, stride, *rest, kind="tensor", dtype=None):
    requires_grad = bool(rest[0]) if rest and isinstance(rest[0], bool) else False
    if dtype is None:
        dtype = storage.dtype if isinstance(storage, StorageRef) else "?"
    return TensorInfo(storage if isinstance(storage, StorageRef) else None, _int(storage_offset),
                      _shape(size), _shape(stride), dtype, requires_grad, kind)


def _int(v) -> int:
    return v if isinstance(v, int) else 0


MAX_DIMS = 64  # torch and numpy allow fewer; a longer "shape" is a forged one (a copy per tensor: a memory bomb)


def _shape(v) -> tuple:
    if isinstance(v, Opaque) and v._name == "Size" and v.args:
        v = v.args[0]
    return tuple(v) if isinstance(v, (tuple, list)) and len(v) <= MAX_DIMS else ()


def _rebuild_v3(storage, offset, size, stride, requires_grad, hooks, dtype=None, *_):
    return _rebuild_tensor(storage, offset, size, stride, requires_grad,
                           dtype=dtype.name if isinstance(dtype, DType) else None)


def _rebuild_parameter(data, requires_grad=False, *_):
    if isinstance(data, TensorInfo):
        data.kind, data.requires_grad = "parameter", bool(requires_grad)
    return data


def _rebuild_from_type_v2(func, new_type, args, state=None):
    if isinstance(func, type) and issubclass(func, _Function) and isinstance(args, tuple):
        return func(*args)
    return Opaque.__new__(_stand_in("torch._tensor", "_rebuild_from_type_v2"), func, new_type, args, state)


def _rebuild_meta(dtype, size, stride, requires_grad=False, *_):
    return TensorInfo(None, 0, _shape(size), _shape(stride), dtype.name if isinstance(dtype, DType) else "?",
                      bool(requires_grad), "meta")


def _rebuild_wrapper_subclass(cls, dtype, size, stride, storage_offset=0, *_):
    return TensorInfo(None, _int(storage_offset), _shape(size), _shape(stride),
                      dtype.name if isinstance(dtype, DType) else "?", False, "subclass")


def _rebuild_qtensor(storage, offset, size, stride, _qparams, requires_grad=False, *_):
    return _rebuild_tensor(storage, offset, size, stride, requires_grad, kind="qtensor")


def _codecs_encode(text, encoding="utf-8", *_):
    if isinstance(text, str) and encoding in ("latin1", "latin-1", "utf-8", "utf8", "ascii"):
        _charge(64 + 4 * len(text), "_codecs.encode")
        return text.encode(encoding)
    raise pickle.UnpicklingError(f"_codecs.encode with {encoding!r} refused")


class _Function(Opaque):
    """Stand-in whose call runs one of *our* pure functions above (never the real one)."""

    _impl = staticmethod(lambda *a: None)

    def __new__(cls, *args, **kwargs):
        return cls._impl(*args, **kwargs)


class _NDArray(Opaque):
    """``numpy.core.multiarray._reconstruct(ndarray, (0,), b'b')`` then BUILD with
    (version, shape, dtype, fortran, raw) - keep shape and dtype, drop the bytes."""

    @_RefuseOnClass
    def __setstate__(self, state):
        if isinstance(state, tuple) and len(state) >= 3:
            dtype = state[2]
            self.state = NDArrayInfo(_shape(state[1]),
                                     dtype.args[0] if isinstance(dtype, Opaque) and dtype.args else "?")


def _bytearray(data=b"", encoding="latin1", *_):
    """Only from given bytes/str: ``bytearray(2**40)`` would be a memory bomb."""
    if isinstance(data, (bytes, bytearray)):
        _charge(64 + len(data), "bytearray(<bytes>)")
        return bytearray(data)
    if isinstance(data, str) and encoding in ("latin1", "latin-1", "utf-8", "utf8", "ascii"):
        _charge(64 + 5 * len(data), "bytearray(<str>)")
        return bytearray(data.encode(encoding))
    raise pickle.UnpicklingError("bytearray(<size>) refused: only bytearray(<bytes>) is data")


class _NumpyDType(Opaque):
    """``numpy.dtype(code, align, copy)``: records the code, so the allowlist advice can name the
    ``numpy.dtypes`` class that ``weights_only`` checks as well."""

    _sink: set = set()

    def __new__(cls, *args, **kwargs):
        if args and isinstance(args[0], str):
            cls._sink.add(args[0])
        return Opaque.__new__(cls, *args, **kwargs)


_NUMPY_SCALAR_FORMATS = {"f8": "<d", "f4": "<f", "i8": "<q", "i4": "<i", "u4": "<I", "u8": "<Q", "b1": "<?"}


def _numpy_scalar(dtype, raw=b"", *_):
    code = dtype.args[0] if isinstance(dtype, Opaque) and dtype.args else None
    fmt = _NUMPY_SCALAR_FORMATS.get(code)
    if fmt and isinstance(raw, bytes) and len(raw) == struct.calcsize(fmt):
        return struct.unpack(fmt, raw)[0]
    return NDArrayInfo((), str(code))


def _charged(build: type, per_item: int):
    """``build(items)`` (a real set, frozenset or OrderedDict), charged before it is built: one
    REDUCE of ``set`` on a memoised million-item list is 4 bytes of pickle and ~100 MB of set."""
    def make(items=(), *rest):
        try:
            n = len(items)
        except TypeError:
            raise pickle.UnpicklingError(f"{build.__name__}() of a {type(items).__name__} refused (not a container)") from None
        _charge(256 + per_item * n, f"{build.__name__} of {n:,} items")
        return build(items, *rest)
    return make


_SAFE_REAL = {
    ("collections", "OrderedDict"): _charged(collections.OrderedDict, 160), ("builtins", "set"): _charged(set, 128),
    ("builtins", "frozenset"): _charged(frozenset, 128), ("builtins", "complex"): complex, ("builtins", "slice"): slice,
    ("__builtin__", "set"): _charged(set, 128), ("__builtin__", "frozenset"): _charged(frozenset, 128),
}
_FUNCTIONS = {
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor_v3"): _rebuild_v3,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
    ("torch._utils", "_rebuild_qtensor"): _rebuild_qtensor,
    ("torch._utils", "_rebuild_meta_tensor_no_storage"): _rebuild_meta,
    ("torch._utils", "_rebuild_wrapper_subclass"): _rebuild_wrapper_subclass,
    ("torch._tensor", "_rebuild_from_type_v2"): _rebuild_from_type_v2,
    ("_codecs", "encode"): _codecs_encode,
    ("builtins", "bytearray"): _bytearray,
    ("__builtin__", "bytearray"): _bytearray,
    ("numpy.core.multiarray", "scalar"): _numpy_scalar,
    ("numpy._core.multiarray", "scalar"): _numpy_scalar,
}
_NDARRAY_RECONSTRUCT = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct")}


class StubResult:
    """What unpickling with stand-ins gave: the object tree, every global named, the storages."""

    def __init__(self) -> None:
        self.obj: object = None
        self.globals: dict[tuple[str, str], int] = {}  # (module, name) -> count
        self.storages: dict[str, StorageRef] = {}
        self.numpy_dtypes: set[str] = set()  # codes passed to numpy.dtype(...)
        self.scan: OpScan | None = None
        self.error: str | None = None
        self.budget: Budget | None = None


class StubUnpickler(pickle.Unpickler):
    """C-accelerated unpickler whose ``find_class`` returns inert stand-ins (never imports)."""

    def __init__(self, file, result: StubResult):
        super().__init__(file)
        self.result = result
        self._classes: dict[tuple[str, str], object] = {}

    def find_class(self, module, name):
        key = (str(module), str(name))
        self.result.globals[key] = self.result.globals.get(key, 0) + 1
        if key in _SAFE_REAL:
            return _SAFE_REAL[key]
        if key[0] in ("torch", "torch.storage", "torch.cuda") and key[1] in STORAGE_TYPES:
            return StorageType(key[1], *STORAGE_TYPES[key[1]])
        if key[0] == "torch" and key[1] in DTYPE_BYTES:
            return DType(key[1], DTYPE_BYTES[key[1]])
        if key not in self._classes:  # fresh stand-ins per file: nothing persists between files
            if key in _FUNCTIONS:
                cls = _stand_in(*key, base=_Function)
                cls._impl = staticmethod(_FUNCTIONS[key])
            elif key in _NDARRAY_RECONSTRUCT:
                cls = _stand_in(*key, base=_NDArray)
            elif key == ("numpy", "dtype"):
                cls = _stand_in(*key, base=_NumpyDType)
                cls._sink = self.result.numpy_dtypes
            else:
                cls = _stand_in(*key)
            self._classes[key] = cls
        return self._classes[key]

    def persistent_load(self, pid):
        if isinstance(pid, tuple) and len(pid) in (5, 6) and pid[0] == "storage":
            typ, key, location, numel = pid[1], str(pid[2]), str(pid[3]), pid[4]
            if not isinstance(typ, StorageType):
                typ = StorageType("UntypedStorage", "uint8", 1)
            ref = self.result.storages.get(key)
            if ref is None:
                ref = StorageRef(key, typ.name, typ.dtype, typ.itemsize, location, numel if isinstance(numel, int) else -1)
                self.result.storages[key] = ref
            return ref
        raise pickle.UnpicklingError(f"unsupported persistent id {str(pid)[:60]!r} (torch only writes ('storage', ...))")


_STRING_OPS = frozenset({"SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "BINUNICODE8", "SHORT_BINSTRING",
                         "BINSTRING", "STRING"})
_NO_PUSH_OPS = frozenset({"PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE", "FRAME", "PROTO", "MARK", "STOP", "POP"})
_PUT_OPS = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})
# The opcodes torch's own ``weights_only`` unpickler implements (torch/_weights_only_unpickler.py):
# a pickle using any other (protocol 4/5 framing, STACK_GLOBAL, MEMOIZE...) is refused by it.
WEIGHTS_ONLY_OPS = frozenset("""
APPEND APPENDS BINFLOAT BINGET LONG_BINGET BININT BININT1 BININT2 BINPERSID BINPUT LONG_BINPUT
BINUNICODE BUILD EMPTY_DICT EMPTY_LIST EMPTY_SET EMPTY_TUPLE GLOBAL LONG1 MARK NEWFALSE NEWOBJ
NEWTRUE NONE PROTO REDUCE SETITEM SETITEMS SHORT_BINSTRING STOP TUPLE TUPLE1 TUPLE2 TUPLE3
""".split())
# A pickler numbers memo slots 0, 1, 2, ... so a slot beyond the number of opcodes is forged; the C
# unpickler allocates an array up to the highest slot (a 9-byte pickle could ask for 32 GB).
MEMO_SLACK = 1 << 16
MAX_STACK_ITEMS = 4_000_000  # values alive at once (a 600-tensor optimizer state needs ~10k)


class OpScan:
    """One static pass over the opcodes, before anything is unpickled."""

    def __init__(self, room: int | None = None) -> None:
        self.globals: dict[tuple[str, str], int] = {}
        self.protocol = 0
        self.ops = 0
        self.max_memo = -1
        self.max_stack = 0
        self.unsupported_by_weights_only: set[str] = set()
        self.end: int | None = None  # stream offset just past STOP
        self.error: str | None = None
        #: an upper bound of the bytes the unpickler allocates for what the scanned opcodes build
        self.cost = 0
        self.room = room  # bytes of the budget left for this pickle (None: no limit)

    def refusal(self) -> str | None:
        """Why the stub must not load it (memory bombs), else None."""
        if self.max_memo > self.ops + MEMO_SLACK:
            return (f"memo slot {self.max_memo:,} in a pickle of {self.ops:,} opcodes "
                    f"(forged: would allocate {self.max_memo * 8:,}+ bytes)")
        if self.max_stack > MAX_STACK_ITEMS:
            return f"more than {MAX_STACK_ITEMS:,} values on the unpickling stack at once (memory bomb)"
        if self.room is not None and self.cost > self.room:
            return (f"unpickling it would take more than {self.cost >> 20:,} MiB after {self.ops:,} opcodes, over "
                    f"the {self.room >> 20:,} MiB left of its memory budget (4x the file, at most "
                    f"{MEMORY_CAP >> 20} MiB: a memory bomb)")
        return None


# What the opcode scan does with each opcode (indexed by the opcode byte, then small-int tests: the
# scan is most of ``ckpt inspect``'s own work, ~16,000 opcodes for a 600-tensor optimizer state).
_PLAIN, _PUT, _STRING, _GET, _MEMOIZE, _GLOBAL, _STACK_GLOBAL, _PROTO, _STOP, _MARK, _NO_PUSH = range(11)


def _role(name: str) -> int:
    if name in _PUT_OPS:
        return _PUT
    if name in _STRING_OPS:
        return _STRING
    return {"GET": _GET, "BINGET": _GET, "LONG_BINGET": _GET, "MEMOIZE": _MEMOIZE, "GLOBAL": _GLOBAL, "INST": _GLOBAL,
            "STACK_GLOBAL": _STACK_GLOBAL, "PROTO": _PROTO, "STOP": _STOP, "MARK": _MARK}.get(
        name, _NO_PUSH if name in _NO_PUSH_OPS else _PLAIN)


# Bytes the C unpickler (and the stand-ins) allocate per opcode: (fixed, per byte of its argument,
# per value taken back to the MARK), on top of the pickle's own bytes (the scan holds them). Upper
# bounds measured with tracemalloc on pickles of a million of each (an empty dict: 81 bytes; a
# stand-in called by REDUCE: 313; a new global's stand-in class: 2,600); every pushed value also
# holds a 16-byte stack or container slot.
_COSTS = {
    "INT": 48, "BININT": 48, "BININT1": 48, "BININT2": 48, "FLOAT": 48, "BINFLOAT": 48,
    "LONG": (48, 1, 0), "LONG1": (48, 1, 0), "LONG4": (48, 1, 0),
    **{n: (96, 5, 0) for n in _STRING_OPS},
    **{n: (64, 2, 0) for n in ("BINBYTES", "SHORT_BINBYTES", "BINBYTES8", "BYTEARRAY8")},
    "EMPTY_DICT": 96, "EMPTY_LIST": 80, "EMPTY_SET": 240, "APPEND": 16, "SETITEM": 128, "MARK": 8,
    "TUPLE1": 56, "TUPLE2": 64, "TUPLE3": 72, "TUPLE": (56, 0, 8), "LIST": (80, 0, 16), "DICT": (96, 0, 64),
    "APPENDS": (0, 0, 16), "SETITEMS": (0, 0, 64), "ADDITEMS": (0, 0, 128), "FROZENSET": (240, 0, 128),
    "OBJ": (400, 0, 8), "INST": (400, 0, 8), "PUT": 112, "BINPUT": 112, "LONG_BINPUT": 112, "MEMOIZE": 112,
    "REDUCE": 400, "NEWOBJ": 400, "NEWOBJ_EX": 400, "BUILD": 400, "PERSID": 400, "BINPERSID": 400,
}
NEW_GLOBAL_BYTES = 2_800  # a stand-in class per distinct global (cached: only the first use costs)


def _cost(name: str) -> tuple[int, int, int]:
    c = _COSTS.get(name, 16)  # the rest push one value (NONE, GET, DUP, ...)
    return c if isinstance(c, tuple) else (c, 0, 0)


_ROLE = [_role(op.name) if (op := OPCODES.get(code)) else _PLAIN for code in range(256)]
_DELTA = [op.delta if (op := OPCODES.get(code)) else 0 for code in range(256)]
_POPS_MARK = [bool(op and op.pops_mark) for op in map(OPCODES.get, range(256))]
_FIXED = [_cost(op.name)[0] if (op := OPCODES.get(code)) else 0 for code in range(256)]
_PER_BYTE = [_cost(op.name)[1] if (op := OPCODES.get(code)) else 0 for code in range(256)]
_PER_ITEM = [_cost(op.name)[2] if (op := OPCODES.get(code)) else 0 for code in range(256)]
STRING_BYTE_COST = _COSTS["BINUNICODE"][1]  # charged in the scan's string branch (the most common sized opcode)
_SIZED = [bool(_PER_BYTE[code] or _PER_ITEM[code]) and _ROLE[code] != _STRING for code in range(256)]


def _arg_bytes(arg) -> int:
    return (arg.bit_length() + 7) // 8 if isinstance(arg, int) else len(arg) if arg is not None else 0


def scan_ops(data_or_file, room: int | None = None) -> OpScan:
    """Static opcode walk: every GLOBAL/INST/STACK_GLOBAL (STACK_GLOBAL strings resolved through
    the memo, so names hidden behind memo tricks are still seen), the highest memo slot, the
    stack high-water mark, the opcodes ``weights_only`` lacks and what unpickling would allocate
    (``cost``; the scan stops once it passes ``room``). Reads up to STOP only."""
    scan = OpScan(room)
    limit = room if room is not None else 1 << 62
    last = prev = None  # the last two values pushed (strings or None), for STACK_GLOBAL
    memo: dict = {}  # as big as the unpickler's (each PUT is charged): the scan stops at the budget too
    depth, marks, max_stack, max_memo, ops, cost = 0, [], 0, -1, 0, 0
    start = 0 if isinstance(data_or_file, (bytes, bytearray, memoryview)) else data_or_file.tell()
    limit += start  # compared with cost + pos: what the opcodes build, plus the bytes read so far
    globals_, seen, pos = scan.globals, set(), start
    try:
        for code, arg, pos in walk(data_or_file):
            ops += 1
            seen.add(code)
            cost += _FIXED[code]
            if _SIZED[code]:  # bytes, longs; the opcodes that take the values back to a MARK (strings: below)
                cost += _PER_BYTE[code] * _arg_bytes(arg) + _PER_ITEM[code] * (depth - (marks[-1] if marks else 0))
            if cost + pos > limit:
                break  # over the budget (see OpScan.refusal): stop before the scan's own memo grows any further
            role = _ROLE[code]
            if role == _PLAIN:  # most opcodes: values pushed or popped, no names (tested first: fastest)
                prev, last = last, None
            elif role == _PUT:
                memo[arg] = last
                if arg > max_memo:
                    max_memo = arg
                    if max_memo > ops + MEMO_SLACK:
                        break  # forged (see OpScan.refusal): stop before the memo grows any further
                continue  # PUTs leave the stack and the last values alone
            elif role == _STRING:
                cost += STRING_BYTE_COST * len(arg)
                prev, last = last, arg
            elif role == _GET:
                prev, last = last, memo.get(arg)
            elif role == _MARK:
                marks.append(depth)
                continue
            elif role == _MEMOIZE:
                memo[len(memo)] = last
            elif role == _GLOBAL:
                module, _, attr = str(arg).partition(" ")
                if (module, attr) not in globals_:
                    cost += NEW_GLOBAL_BYTES
                globals_[(module, attr)] = globals_.get((module, attr), 0) + 1
                prev, last = last, None
            elif role == _STACK_GLOBAL:
                key = (prev, last) if isinstance(prev, str) and isinstance(last, str) else ("?", "<computed name>")
                if key not in globals_:
                    cost += NEW_GLOBAL_BYTES
                globals_[key] = globals_.get(key, 0) + 1
                prev, last = last, None
            elif role == _PROTO:
                scan.protocol = arg
            elif role == _STOP:
                scan.end = pos + 1
            if _POPS_MARK[code]:
                depth = (marks.pop() if marks else 0) + _DELTA[code]
            else:
                depth += _DELTA[code]
            if depth > max_stack:
                max_stack = depth
                if depth > MAX_STACK_ITEMS:
                    break
    except Exception as exc:  # noqa: BLE001 - a broken stream just ends the scan
        scan.error = f"{type(exc).__name__}: {exc}"
    scan.ops, scan.max_stack, scan.max_memo = ops, max_stack, max_memo
    scan.cost = cost + pos - start + 16 * max(0, max_memo)  # + the pickle's bytes + the C unpickler's memo array
    scan.unsupported_by_weights_only.update({OPCODES[code].name for code in seen} - WEIGHTS_ONLY_OPS)
    return scan


def stub_load(data_or_file, limit: int = MAX_PICKLE_BYTES, budget: Budget | None = None) -> StubResult:
    """Unpickle one pickle with stand-ins. Never raises: failures land in ``result.error``.

    The opcodes are scanned first (memo and stack limits, and what unpickling would allocate: a
    tiny forged pickle must not take gigabytes), then the C unpickler runs on the same bytes with
    stand-ins. ``budget``: shared by every pickle of one file (default: :func:`memory_budget` of
    this pickle's size, or of the file's when a file is given)."""
    result = StubResult()
    if isinstance(data_or_file, (bytes, bytearray)):
        if len(data_or_file) > limit:
            result.error = f"pickle is {len(data_or_file):,} bytes (limit {limit:,})"
            return result
        size = len(data_or_file)
        data_or_file = io.BytesIO(data_or_file)
    else:
        try:
            size = os.fstat(data_or_file.fileno()).st_size
        except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
            size = 0
    if budget is None:
        budget = Budget(memory_budget(size))
    result.budget = budget
    start = data_or_file.tell()
    result.scan = scan_ops(data_or_file, max(0, budget.limit - budget.used))
    data_or_file.seek(start)
    refusal = result.scan.refusal()
    if refusal:
        result.error = f"refused before unpickling: {refusal}"
        result.globals.update(result.scan.globals)
        return result
    budget.used += result.scan.cost
    _ACTIVE.append(budget)
    try:
        result.obj = StubUnpickler(data_or_file, result).load()
    except BudgetExceeded as exc:
        result.error = f"refused while unpickling: {exc}"
    except RecursionError:
        result.error = "pickle nests too deeply"
    except MemoryError:
        result.error = "pickle needs too much memory"
    except Exception as exc:  # noqa: BLE001 - any malformed pickle must become a reason
        result.error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    finally:
        _ACTIVE.pop()
    if result.error:
        for key, n in result.scan.globals.items():
            result.globals.setdefault(key, n)
    return result
