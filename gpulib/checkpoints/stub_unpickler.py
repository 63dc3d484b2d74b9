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
"""

from __future__ import annotations

import collections
import io
import pickle
import struct
from dataclasses import dataclass, field

MAX_PICKLE_BYTES = 256 << 20

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
# Modules whose every name can run code, touch files or the network (picklescan, modelscan and
# fickling denylists merged). A global from one of these is a security finding.
DANGEROUS_MODULES = frozenset("""
os posix nt subprocess sys runpy pty shutil socket ssl asyncio ctypes _ctypes multiprocessing
_posixsubprocess code codeop marshal importlib _imp imp pkgutil zipimport pickle _pickle dill
cloudpickle joblib bdb pdb cProfile profile timeit trace pydoc webbrowser httplib http requests
urllib urllib2 aiohttp smtplib ftplib telnetlib xmlrpc venv ensurepip pip idlelib lib2to3 signal
_thread threading atexit tempfile distutils commands platform types doctest _interpreters
""".split())
DANGEROUS_NAMES = frozenset({
    ("builtins", n) for n in ("eval", "exec", "compile", "getattr", "setattr", "delattr", "open",
                              "breakpoint", "__import__", "apply", "input", "globals", "locals", "vars")
} | {("__builtin__", n) for n in ("eval", "exec", "compile", "getattr", "open", "apply", "__import__")} | {
    ("functools", "partial"), ("functools", "reduce"), ("operator", "attrgetter"),
    ("operator", "itemgetter"), ("operator", "methodcaller"), ("_operator", "attrgetter"),
    ("_operator", "itemgetter"), ("_operator", "methodcaller"), ("_io", "FileIO"), ("io", "FileIO"),
    ("_io", "open"), ("io", "open"), ("logging", "FileHandler"), ("torch", "load"),
    ("torch.serialization", "load"), ("torch.storage", "_load_from_bytes"), ("torch.hub", "load"),
    ("torch.utils.collect_env", "run"), ("numpy.testing._private.utils", "runstring"),
    ("torch.jit", "load"), ("torch._inductor.codecache", "compile_file"),
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
NESTED_PICKLE_LOADERS = frozenset({("pickle", "loads"), ("_pickle", "loads"), ("torch.storage", "_load_from_bytes"),
                                   ("dill", "loads"), ("cloudpickle", "loads")})


def classify_global(module: str, name: str) -> tuple[str, str]:
    """('dangerous'|'needs_allowlist'|'weights_only_ok', why)."""
    top = module.split(".")[0]
    if (module, name) in DANGEROUS_NAMES:
        return "dangerous", f"{module}.{name} can run code or touch files when unpickled"
    if top in DANGEROUS_MODULES or module in DANGEROUS_MODULES:
        return "dangerous", f"module {module} (denylisted by picklescan/fickling/modelscan: code execution, files, network)"
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
    return "needs_allowlist", "not in torch's weights_only allowlist: torch.load(weights_only=True) refuses it"


# --- stand-in values -----------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class StorageType:
    name: str
    dtype: str
    itemsize: int


@dataclass(frozen=True, slots=True)
class DType:
    name: str
    itemsize: int


@dataclass(slots=True)
class StorageRef:
    """A tensor storage named by the pickle; the bytes live in ``data/<key>`` (zip) or after the
    pickles (legacy). ``numel`` is in elements of ``storage_type`` (bytes for UntypedStorage)."""

    key: str
    storage_type: str
    dtype: str
    itemsize: int
    location: str
    numel: int

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize


@dataclass(slots=True)
class TensorInfo:
    storage: StorageRef | None
    offset: int
    shape: tuple
    stride: tuple
    dtype: str
    requires_grad: bool = False
    kind: str = "tensor"  # tensor | parameter | qtensor | meta | subclass

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d if isinstance(d, int) else 0
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPE_BYTES.get(self.dtype, 1)


@dataclass(slots=True)
class NDArrayInfo:
    """A numpy array (e.g. the MT19937 key of ``np.random.get_state()``), never materialised."""

    shape: tuple = ()
    dtype: str = "?"


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


def _shape(v) -> tuple:
    if isinstance(v, Opaque) and v._name == "Size" and v.args:
        v = v.args[0]
    return tuple(v) if isinstance(v, (tuple, list)) else ()


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
            self.state = NDArrayInfo(tuple(state[1]) if isinstance(state[1], tuple) else (),
                                     dtype.args[0] if isinstance(dtype, Opaque) and dtype.args else "?")


def _bytearray(data=b"", encoding="latin1", *_):
    """Only from given bytes/str: ``bytearray(2**40)`` would be a memory bomb."""
    if isinstance(data, (bytes, bytearray)):
        return bytearray(data)
    if isinstance(data, str) and encoding in ("latin1", "latin-1", "utf-8", "utf8", "ascii"):
        return bytearray(data.encode(encoding))
    raise pickle.UnpicklingError("bytearray(<size>) refused: only bytearray(<bytes>) is data")


_NUMPY_SCALAR_FORMATS = {"f8": "<d", "f4": "<f", "i8": "<q", "i4": "<i", "u4": "<I", "u8": "<Q", "b1": "<?"}


def _numpy_scalar(dtype, raw=b"", *_):
    code = dtype.args[0] if isinstance(dtype, Opaque) and dtype.args else None
    fmt = _NUMPY_SCALAR_FORMATS.get(code)
    if fmt and isinstance(raw, bytes) and len(raw) == struct.calcsize(fmt):
        return struct.unpack(fmt, raw)[0]
    return NDArrayInfo((), str(code))


_SAFE_REAL = {
    ("collections", "OrderedDict"): collections.OrderedDict, ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset, ("builtins", "complex"): complex, ("builtins", "slice"): slice,
    ("__builtin__", "set"): set, ("__builtin__", "frozenset"): frozenset,
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


@dataclass
class StubResult:
    obj: object = None
    globals: dict[tuple[str, str], int] = field(default_factory=dict)  # (module, name) -> count
    storages: dict[str, StorageRef] = field(default_factory=dict)
    error: str | None = None


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


def scan_globals(data: bytes) -> dict[tuple[str, str], int]:
    """Static opcode walk: every GLOBAL/INST/STACK_GLOBAL, with STACK_GLOBAL strings resolved
    through the memo. Used when the stub load stopped early, so globals after the failure point
    (a truncated or deliberately broken pickle) are still reported."""
    import pickletools  # only broken pickles pay for this import

    found: dict[tuple[str, str], int] = {}
    recent: list = [None, None]  # the last two values pushed (strings or None)
    memo: dict = {}
    try:
        for op, arg, _pos in pickletools.genops(data):
            name = op.name
            if name in ("GLOBAL", "INST"):
                module, _, attr = str(arg).partition(" ")
                found[(module, attr)] = found.get((module, attr), 0) + 1
            elif name == "STACK_GLOBAL":
                key = (str(recent[0]), str(recent[1])) if all(isinstance(v, str) for v in recent) else ("?", "<computed name>")
                found[key] = found.get(key, 0) + 1
            if name in ("PUT", "BINPUT", "LONG_BINPUT"):
                memo[arg] = recent[1]
            elif name == "MEMOIZE":
                memo[len(memo)] = recent[1]
            elif name in ("GET", "BINGET", "LONG_BINGET"):
                recent = [recent[1], memo.get(arg)]
            elif name in _STRING_OPS:
                recent = [recent[1], arg]
            elif name not in _NO_PUSH_OPS:
                recent = [recent[1], None]
    except Exception:  # noqa: BLE001,S110 - a broken stream just ends the scan
        pass
    return found


def stub_load(data_or_file, limit: int = MAX_PICKLE_BYTES) -> StubResult:
    """Unpickle one pickle with stand-ins. Never raises: failures land in ``result.error``."""
    result = StubResult()
    if isinstance(data_or_file, (bytes, bytearray)):
        if len(data_or_file) > limit:
            result.error = f"pickle is {len(data_or_file):,} bytes (limit {limit:,})"
            return result
        data_or_file = io.BytesIO(data_or_file)
    try:
        result.obj = StubUnpickler(data_or_file, result).load()
    except RecursionError:
        result.error = "pickle nests too deeply"
    except MemoryError:
        result.error = "pickle needs too much memory"
    except Exception as exc:  # noqa: BLE001 - any malformed pickle must become a reason
        result.error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if result.error and isinstance(data_or_file, io.BytesIO):
        for key, n in scan_globals(data_or_file.getvalue()).items():
            result.globals.setdefault(key, n)
    return result
