"""A folder inside the evidence that cannot be listed: "no interruption" would be a claim about
files nobody read (unknown, exit 4, naming it); a cause found in what was read stands."""

from __future__ import annotations

import json

from tests.conftest import REPO, locked_folder

QUIET = "2026-07-08T09:10:11+0000 node-d kernel: nvidia-nvlink: Nvlink Core is being initialized\n"
XID = "2026-07-08T09:12:13+0000 node-d kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n"


def _diagnose_without_root_read(run_without_root_read, path) -> dict:
    done = run_without_root_read(
        f"import sys, json; sys.path.insert(0, {str(REPO)!r}); from gpulib.diagnose import diagnose;"
        f"print(json.dumps(diagnose([{str(path)!r}]).to_dict()['verdict']))")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_no_none_over_a_subfolder_that_could_not_be_read(tmp_path, run_without_root_read):
    (tmp_path / "node-d").mkdir()
    (tmp_path / "node-d" / "kern.log").write_text(QUIET)
    with locked_folder(tmp_path / "node-d" / "nvsmi", {"q.txt": XID}):
        verdict = _diagnose_without_root_read(run_without_root_read, tmp_path)
    assert verdict["interruption"] == "unknown", verdict
    assert "could not be read" in verdict["summary"] and "nvsmi" in verdict["summary"]


def test_a_cause_found_in_what_was_read_stands(tmp_path, run_without_root_read):
    (tmp_path / "node-d").mkdir()
    (tmp_path / "node-d" / "kern.log").write_text(XID)
    with locked_folder(tmp_path / "node-d" / "nvsmi", {"q.txt": QUIET}):
        verdict = _diagnose_without_root_read(run_without_root_read, tmp_path)
    assert verdict["interruption"] == "hard" and verdict["category"] == "gpu_fell_off_bus", verdict
