"""Per-node digests (the map step): a diagnosis that reads them says what the raw files say."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from gpulib.diagnose import diagnose, node_digest
from gpulib.evidence import digest, gather
from gpulib.evidence.bundle import verify
from gpulib.evidence.thresholds import Thresholds
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
    real_examine = gather._examine
    monkeypatch.setattr(gather, "_examine", lambda f, *a: examined.append(f.path) or real_examine(f, *a))
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
    path.write_text(re.sub(r'"~c":"gpulib\.parsers\.[\w.]+:\w+"', '"~c":"subprocess:Popen"', text, count=1))
    with pytest.raises(ValueError, match="not a parser record"):
        digest._record_class("subprocess:Popen")
    assert digest.load(bundle, None) is None
    assert json.loads(text)["schema"] == digest.SCHEMA


def _digests(root):
    bundles = sorted(p for p in root.iterdir() if (p / "manifest.json").is_file())
    for b in bundles:
        node_digest.write(b)
    return bundles


def test_a_quiet_node_carries_summaries_and_the_culprit_its_evidence(tmp_path):
    incident = simulate_incident(tmp_path / "inc", 6, "xid79", seed=5)
    _digests(tmp_path / "inc")
    culprit = json.loads((tmp_path / "inc" / incident.host / "digest.json").read_text())
    quiet_host = next(p.name for p in sorted((tmp_path / "inc").iterdir()) if p.is_dir() and p.name != incident.host)
    quiet = json.loads((tmp_path / "inc" / quiet_host / "digest.json").read_text())
    assert all("records" not in f for f in quiet["inputs"] if f["kind"] != "versions")
    assert {g[0] for f in quiet["inputs"] if "summary" in f for g in f["summary"]["gpus"]} >= {"0000:18:00.0"}
    carried = {f["kind"] for f in culprit["inputs"] if "records" in f}
    assert {"kernel_log", "nvidia_smi_q"} <= carried  # the Xid line and the lost GPU travel as records


def test_a_node_captured_twice_is_read_raw_where_its_hosts_meet(tmp_path):
    incident = simulate_incident(tmp_path / "inc", 5, "xid79", seed=8)
    quiet_host = next(p.name for p in sorted((tmp_path / "inc").iterdir()) if p.is_dir() and p.name != incident.host)
    later = tmp_path / "inc" / f"{quiet_host}-later"
    shutil.copytree(tmp_path / "inc" / quiet_host, later)  # a second capture of the same node (same host)
    raw = _answer(tmp_path / "inc")
    _digests(tmp_path / "inc")
    gathered = gather.gather([tmp_path / "inc"])
    both = [f for f in gathered.files if f.kind == "kernel_log" and f.host == quiet_host]
    assert len(both) == 2 and all(not f.summary_only and f.records for f in both)  # read raw: their events meet
    assert _answer(tmp_path / "inc") == raw


def test_a_reboot_inside_the_job_on_a_quiet_node_is_still_found(tmp_path):
    incident = simulate_incident(tmp_path / "inc", 4, "thermal", seed=2)
    quiet = next(p for p in sorted((tmp_path / "inc").iterdir()) if p.is_dir() and p.name != incident.host)
    dmesg = next(quiet.rglob("dmesg*"))
    lines = dmesg.read_text().splitlines(keepends=True)
    reboot = ("[Tue Feb 10 02:39:00 2026] nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, "
              "skipping further processing\n"
              "[Tue Feb 10 02:40:00 2026] Linux version 5.15.0-126-generic (buildd@lcy02) #136-Ubuntu SMP\n")
    dmesg.write_text("".join(lines) + reboot)  # the node went down during the job and came back
    raw = _answer(tmp_path / "inc")
    assert any(f["id"].startswith("node-lost") and f["host"] == quiet.name for f in raw["findings"])
    _digests(tmp_path / "inc")
    assert "records" in next(f for f in json.loads((quiet / "digest.json").read_text())["inputs"]
                             if f["kind"] == "kernel_log")
    assert _answer(tmp_path / "inc") == raw


def test_a_digest_judged_with_other_thresholds_is_not_used(tmp_path):
    simulate_incident(tmp_path / "inc", 2, "thermal", seed=1)
    bundle = _digests(tmp_path / "inc")[0]
    assert digest.load(bundle, None, Thresholds()) is not None
    assert digest.load(bundle, None, Thresholds(temp_limit_c=70)) is None  # a quiet GPU may be hot at 70 C


def test_a_process_left_on_a_quiet_node_is_still_a_leftover(tmp_path):
    incident = simulate_incident(tmp_path / "inc", 3, "xid79", seed=4)
    quiet = next(p for p in sorted((tmp_path / "inc").iterdir()) if p.is_dir() and p.name != incident.host)
    q = next(quiet.rglob("q.txt"))
    held = ("    Processes\n        GPU instance ID                   : N/A\n        Compute instance ID               : N/A\n"
            "        Process ID                        : 40626\n        Type                              : C\n"
            "        Name                              : python\n        Used GPU Memory                   : 70000 MiB\n")
    q.write_text(q.read_text().replace("    Processes                                          : None\n", held, 1))
    raw = _answer(tmp_path / "inc")
    assert any(f["id"].startswith("zombie") and f["host"] == quiet.name for f in raw["findings"])
    _digests(tmp_path / "inc")
    assert _answer(tmp_path / "inc") == raw


REAL_CASES = Path(__file__).resolve().parents[1] / "realworld" / "cases"


def test_digests_of_the_real_world_cases_give_the_raw_answer(tmp_path):
    """Every real-world case (pasted sessions with several tools' outputs, snapshots beside the
    failure they explain, kernel logs) read as one node's folder, digested and raw."""
    cases = sorted(p for p in REAL_CASES.iterdir() if (p / "input").is_dir())
    assert len(cases) >= 40
    for case in cases:
        node = tmp_path / case.name / "node-a"
        shutil.copytree(case / "input", node)
        raw = _answer(tmp_path / case.name)
        node_digest.write(node)
        assert digest.load(node, None) is not None, case.name
        assert _answer(tmp_path / case.name) == raw, case.name
