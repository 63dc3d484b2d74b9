"""Malicious pickles: inspecting never runs them (the marker file never appears) and each is reported."""

from __future__ import annotations

import io
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from gpulib.checkpoints import inspect_path
from gpulib.safe_pickle import classify_global, stub_load
from tests.conftest import REPO


def _marker_cmd(marker: Path) -> str:
    return f"touch {marker}"


def _reduce_pickle(module: str, name: str, args: tuple, protocol: int = 2) -> bytes:
    """A pickle that calls module.name(*args) on load (GLOBAL/STACK_GLOBAL + REDUCE)."""
    class Evil:
        def __reduce__(self):
            import importlib
            return getattr(importlib.import_module(module), name), args
    return pickle.dumps({"state_dict": {}, "payload": Evil()}, protocol=protocol)


def _hand_written(marker: Path) -> dict[str, bytes]:
    """Opcode streams the usual scanners have missed (memo confusion, BUILD injection, getattr chains)."""
    cmd = _marker_cmd(marker).encode()
    s = cmd.decode()
    return {
        # protocol 0 text GLOBAL + REDUCE
        "posix_system_v0": b"cposix\nsystem\n(V" + cmd + b"\ntR.",
        # STACK_GLOBAL whose strings come from the memo (picklescan#14 / modelscan#85 style)
        "memo_stack_global": (b"\x80\x04\x8c\x02os\x94\x8c\x06system\x94h\x00h\x01\x93"
                              + b"\x8c" + bytes([len(cmd)]) + cmd + b"\x85R."),
        # builtins.getattr(builtins.__import__('os'), 'system')(cmd)
        "getattr_chain": (b"\x80\x02cbuiltins\ngetattr\ncbuiltins\n__import__\nX\x02\x00\x00\x00os\x85R"
                          + b"X\x06\x00\x00\x00system\x86R" + b"X" + len(cmd).to_bytes(4, "little") + cmd + b"\x85R."),
        # BUILD on an allowed-looking global to inject attributes, then call it (modelscan#85)
        "build_injection": (b"\x80\x02cnumpy\nprod\n}X\x01\x00\x00\x00aX\x02\x00\x00\x00os"
                            b"sbX" + len(cmd).to_bytes(4, "little") + cmd + b"\x85R."),
        # nested pickle: pickle.loads(b'<pickle that runs os.system>')
        "nested_pickle": pickle.dumps({"x": _Nested(pickle.dumps(_Run(s), protocol=2))}, protocol=2),
        # eval / exec with protocol 4 framing
        "eval_p4": _reduce_pickle("builtins", "eval", (f"__import__('os').system({s!r})",), protocol=4),
        "exec_p5": _reduce_pickle("builtins", "exec", (f"import os; os.system({s!r})",), protocol=5),
        "subprocess": _reduce_pickle("subprocess", "check_call", (["touch", str(marker)],)),
        "runpy": _reduce_pickle("runpy", "run_path", (str(marker),)),
        "os_system_p1": _reduce_pickle("os", "system", (s,), protocol=1),
    }


class _Run:
    def __init__(self, cmd):
        self.cmd = cmd

    def __reduce__(self):
        import os
        return os.system, (self.cmd,)


class _Nested:
    def __init__(self, data):
        self.data = data

    def __reduce__(self):
        return pickle.loads, (self.data,)


@pytest.fixture()
def marker(tmp_path) -> Path:
    return tmp_path / "PWNED"


def test_malicious_plain_pickles_never_run_and_are_reported(tmp_path, marker):
    for name, data in _hand_written(marker).items():
        p = tmp_path / f"{name}.pkl"
        p.write_bytes(data)
        report = inspect_path(p)
        assert not marker.exists(), f"{name}: the payload ran"
        assert report.unsafe, f"{name}: not reported: {report.findings}"
        if name != "build_injection":  # that one is stopped at the BUILD, before any dangerous name
            assert any(g.verdict == "dangerous" for g in report.globals), name


def test_malicious_data_pkl_inside_a_torch_zip(tmp_path, marker, full_ckpt):
    """Swap data.pkl of a real torch.save archive for one that calls os.system."""
    evil = tmp_path / "evil.pt"
    with zipfile.ZipFile(full_ckpt) as src, zipfile.ZipFile(evil, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith("/data.pkl"):
                data = _hand_written(marker)["memo_stack_global"]
            dst.writestr(info.filename, data)
    report = inspect_path(evil)
    assert not marker.exists()
    assert report.unsafe
    assert any("os.system" in f.message for f in report.findings if f.severity == "unsafe")


def test_malicious_pickle_as_dcp_metadata(tmp_path, marker):
    d = tmp_path / "dcp"
    d.mkdir()
    (d / ".metadata").write_bytes(_hand_written(marker)["eval_p4"])
    report = inspect_path(d)
    assert not marker.exists()
    assert report.unsafe and not report.valid
    assert [f.message for f in report.findings if f.severity == "unsafe"] == [
        ".metadata names builtins.eval (builtins.eval can run code or touch files when unpickled); it was NOT run"
        " - never torch.load this file with weights_only=False"]


def test_globals_after_the_failure_point_are_still_reported(marker):
    """The stub stops at the refused BUILD; the static opcode scan still finds the os.system after it."""
    cmd = _marker_cmd(marker).encode()
    data = (b"\x80\x02cnumpy\nprod\n}X\x01\x00\x00\x00aK\x01sb0"
            b"cos\nsystem\nX" + len(cmd).to_bytes(4, "little") + cmd + b"\x85R.")
    result = stub_load(data)
    assert result.error and "BUILD" in result.error
    assert ("os", "system") in result.globals
    assert not marker.exists()


def test_build_on_a_global_is_refused():
    result = stub_load(b"\x80\x02cnumpy\nprod\n}X\x01\x00\x00\x00aK\x01sb.")
    assert result.error and "BUILD on the global numpy.prod refused" in result.error


def test_nested_pickle_globals_are_listed(tmp_path, marker):
    p = tmp_path / "nested.pkl"
    p.write_bytes(_hand_written(marker)["nested_pickle"])
    report = inspect_path(p)
    names = {(g.module, g.name) for g in report.globals}
    assert ("pickle", "loads") in names or ("_pickle", "loads") in names
    assert ("posix", "system") in names or ("os", "system") in names
    assert not marker.exists()


@pytest.mark.parametrize(("module", "name", "verdict"), [
    ("os", "system", "dangerous"), ("posix", "system", "dangerous"), ("builtins", "eval", "dangerous"),
    ("subprocess", "Popen", "dangerous"), ("runpy", "_run_code", "dangerous"), ("builtins", "getattr", "dangerous"),
    ("torch._utils", "_rebuild_tensor_v2", "weights_only_ok"), ("collections", "OrderedDict", "weights_only_ok"),
    ("numpy._core.multiarray", "_reconstruct", "needs_allowlist"), ("argparse", "Namespace", "needs_allowlist"),
])
def test_classification(module, name, verdict):
    assert classify_global(module, name)[0] == verdict


@pytest.mark.parametrize(("entry", "forbidden"), [
    ("gpulib.checkpoints.__main__", ("torch", "numpy")),  # the checkpoint code itself: neither
    ("gpulib.cli", ("torch",)),  # the full CLI (every capability registered): still no torch
])
def test_torch_is_never_imported(full_ckpt, dcp_ckpt, incidents, entry, forbidden):
    """inspect, verify --deep and latest run in a fresh interpreter without importing torch."""
    ckpts = incidents / "case-06-ecc-dbe-truncated-ckpt" / "input" / "checkpoints"
    prefix = "['ckpt', " if entry == "gpulib.cli" else "["
    code = (
        "import sys, io, contextlib\n"
        f"from {entry} import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main({prefix}'inspect', {str(full_ckpt)!r}, {str(dcp_ckpt)!r}])\n"
        f"    main({prefix}'verify', '--deep', {str(full_ckpt)!r}])\n"
        f"    main({prefix}'latest', {str(ckpts)!r}])\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {forbidden!r})\n"
        "print('IMPORTED', bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "IMPORTED []" in out.stdout, out.stdout


def test_stub_result_is_inert_data():
    """What the stub returns for a real-looking tensor pickle is plain data, not callables that run."""
    buf = io.BytesIO()
    pickle.dump({"lr": 0.1, "betas": (0.9, 0.99)}, buf, protocol=2)
    result = stub_load(buf.getvalue())
    assert result.obj == {"lr": 0.1, "betas": (0.9, 0.99)} and result.error is None


def test_memory_bomb_constructors_are_refused():
    """bytearray(2**40) via REDUCE would allocate a terabyte; only bytearray(<bytes>) is allowed."""
    bomb = b"\x80\x02cbuiltins\nbytearray\n\x8a\x06\x00\x00\x00\x00\x00\x01\x85R."
    assert "bytearray(<size>) refused" in stub_load(bomb).error
    ok = pickle.dumps(bytearray(b"abc"), protocol=2)
    assert stub_load(ok).obj == bytearray(b"abc")
