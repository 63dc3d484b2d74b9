"""Per-node digests (the map step): a diagnosis that reads them says what the raw files say."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from gpulib.bundle import verify
from gpulib.diagnose import diagnose, digest, inputs, node_digest
from gpulib.fleet.simulate import simulate_incident


def _node_folders(root):
    """The folders of an incident that hold one node's evidence: its subfolders."""
    return sorted(p for p in root.iterdir() if p.is_dir())


def _answer(path) -> dict:
    out = diagnose([path]).to_dict()
    out.pop("generated_at", None)
    return out




def test_digests_of_the_shared_incidents_give_the_raw_answer(incidents, tmp_path):
    cases = sorted(p for p in incidents.glob("case-*") if p.is_dir())
    digested = 0
    for case in cases:
        work = tmp_path / case.name
        shutil.copytree(case / "input", work)
        raw = _answer(work)
        nodes = _node_folders(work)
        digested += len(nodes)
        for folder in nodes:
            node_digest.write(folder)
        assert all(digest.load(folder, None) is not None for folder in nodes), case.name
        assert _answer(work) == raw, case.name
    assert digested >= 5  # node folders of several cases were read from their digests


def test_digested_bundles_give_the_raw_answer_and_still_verify(tmp_path, monkeypatch):
    incident = simulate_incident(tmp_path / "inc", 12, "xid79", seed=3, drift_nodes=1)
    raw = _answer(tmp_path / "inc")
    bundles = sorted(p for p in (tmp_path / "inc").iterdir() if (p / "manifest.json").is_file())
    for b in bundles:
        node_digest.write(b)
    assert verify(bundles[0]).ok  # the digest is derived, not an unexpected file
    examined = []
    real_examine = inputs._examine
    monkeypatch.setattr(inputs, "_examine", lambda f, *a: examined.append(f.path) or real_examine(f, *a))
    with_digests = _answer(tmp_path / "inc")
    assert with_digests == raw
    assert examined and not any(b in p.parents for p in examined for b in bundles)  # only the job log is read raw
    assert with_digests["root_cause"]["host"] == incident.host


def test_a_stale_digest_is_not_used(tmp_path):
    simulate_incident(tmp_path / "inc", 4, "thermal", seed=1)
    bundle = next(p for p in sorted((tmp_path / "inc").iterdir()) if (p / "manifest.json").is_file())
    node_digest.write(bundle)
    assert digest.load(bundle, None) is not None
    dmesg_dir = next(bundle.rglob("dmesg*")).parent
    extra = dmesg_dir / "dmesg-later.txt"
    extra.write_text("[Tue Feb 10 03:12:07 2026] NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.\n")
    assert digest.load(bundle, None) is None  # a file added to a subfolder after the digest
    extra.unlink()
    os.utime(dmesg_dir, ns=(1, 1))
    node_digest.write(bundle)
    assert digest.load(bundle, None) is not None
    os.utime(next(bundle.rglob("dmesg*")), ns=(1, 1))  # a file changed after the digest was written
    assert digest.load(bundle, None) is None
    assert digest.load(bundle, "Europe/Berlin") is None  # another --tz reads stamps differently


def test_a_digest_builds_only_parser_records(tmp_path):
    simulate_incident(tmp_path / "inc", 2, "thermal", seed=1)
    bundle = next(p for p in sorted((tmp_path / "inc").iterdir()) if (p / "manifest.json").is_file())
    path = node_digest.write(bundle)
    text = path.read_text()
    assert '"~c":"gpulib.parsers.' in text
    path.write_text(text.replace('"~c":"gpulib.parsers.kernel_log:KernelEvent"', '"~c":"subprocess:Popen"', 1))
    with pytest.raises(ValueError, match="not a parser record"):
        digest._record_class("subprocess:Popen")
    assert digest.load(bundle, None) is None
    assert json.loads(text)["schema"] == digest.SCHEMA
