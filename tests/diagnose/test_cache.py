"""The evidence read once per run (gpulib.diagnose.cache): used only while it matches the files."""

from __future__ import annotations

import os

from gpulib import kernel_env
from gpulib.diagnose.cache import fingerprint, load_cached, write_cache
from gpulib.notebook.tables import EvidenceTables, open_evidence
from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "incident-gpu-fell-off-bus"


def _incident(tmp_path):
    folder = tmp_path / "node-a"
    folder.mkdir(parents=True)
    (folder / "kern.log").write_text(
        "2026-02-10T03:12:07+00:00 node-a kernel: NVRM: Xid (PCI:0000:9b:00): 79, pid=1234, "
        "name=python, GPU has fallen off the bus.\n")
    return tmp_path


def test_cached_tables_equal_the_ones_read_from_the_files(tmp_path, monkeypatch):
    cache = write_cache([EXAMPLE], tmp_path / "cache.json")
    live = EvidenceTables(EXAMPLE.resolve())
    monkeypatch.setenv(kernel_env.EVIDENCE_CACHE, str(cache))
    cached = open_evidence(str(EXAMPLE))
    assert load_cached(EXAMPLE.resolve()) is not None
    assert cached.diagnosis["root_cause"] == live.diagnosis["root_cause"]
    assert cached.kernel_events().equals(live.kernel_events())
    assert cached.gpu_states().equals(live.gpu_states())
    assert cached.ranks().equals(live.ranks())
    assert cached.inputs().equals(live.inputs())


def test_a_changed_file_invalidates_the_cache(tmp_path, monkeypatch):
    evidence = _incident(tmp_path / "ev")
    cache = write_cache([evidence], tmp_path / "cache.json")
    assert load_cached(evidence.resolve(), cache) is not None
    log = evidence / "node-a" / "kern.log"
    log.write_text(log.read_text() + "2026-02-10T03:12:09+00:00 node-a kernel: NVRM: Xid (PCI:0000:9b:00): 79, pid=1234\n")
    assert load_cached(evidence.resolve(), cache) is None  # size changed
    os.utime(log, ns=(1, 1))
    cache = write_cache([evidence], tmp_path / "cache.json")
    os.utime(log, ns=(2, 2))
    assert load_cached(evidence.resolve(), cache) is None  # same size, touched since
    monkeypatch.setenv(kernel_env.EVIDENCE_CACHE, str(cache))
    assert len(open_evidence(str(evidence)).kernel_events()) == 2  # read from the files instead


def test_another_path_or_an_unreadable_cache_falls_back_to_the_files(tmp_path, caplog):
    evidence = _incident(tmp_path / "ev")
    cache = write_cache([EXAMPLE], tmp_path / "cache.json")
    assert load_cached(evidence.resolve(), cache) is None
    junk = tmp_path / "junk.json"
    junk.write_bytes(b"\x00\x01 not json")
    assert load_cached(EXAMPLE.resolve(), junk) is None
    assert "junk.json unusable" in caplog.text
    assert load_cached(EXAMPLE.resolve(), tmp_path / "missing.json") is None


def test_fingerprint_names_every_file_with_size_and_mtime(tmp_path):
    evidence = _incident(tmp_path / "ev")
    ((name, size, mtime),) = fingerprint(evidence)
    assert name == "node-a/kern.log" and size == (evidence / name).stat().st_size and mtime > 0
