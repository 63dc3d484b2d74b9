"""Every runbook notebook, executed the way `gpulib run` and an engineer execute it.

- headless (papermill, interactive=False) on the bundled example and on corpus incidents, with
  assertions on the recorded findings (the right GPU, rank, checkpoint), not just "it ran";
- interactive (nbclient, interactive=True): widgets are created and nothing errors;
- a bad evidence path ends in a short, clear message, not a traceback or a dead kernel;
- nbval smoke over the source notebooks; and the sources are committed without outputs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import nbformat
import papermill as pm
import pytest
from nbclient import NotebookClient

from gpulib.notebook.tables import DEFAULT_EVIDENCE
from tests.conftest import INCIDENTS, REPO
from tests.notebooks.runner import NOTEBOOKS, WarmKernel, outputs_text

pytestmark = [pytest.mark.notebook, pytest.mark.timeout(600)]

NAMES = sorted(p.name for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
EXAMPLE = REPO / DEFAULT_EVIDENCE


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    warm = WarmKernel(tmp_path_factory.mktemp("kernel-cwd"))
    yield warm
    warm.shutdown()


def case(name: str) -> str:
    path = INCIDENTS / name / "input"
    if not path.is_dir():
        pytest.skip(f"incident {name} not found at {path}")
    return str(path)


def one(findings, **match):
    hits = [f for f in findings if all(f.get(k) == v for k, v in match.items())]
    assert hits, f"no finding with {match} in {[(f['id'], f['category'], f['title']) for f in findings]}"
    return hits[0]


def test_every_step_notebook_exists():
    assert [n[:2] for n in NAMES] == [f"{i:02d}" for i in range(10)]


# ---------------------------------------------------------------- the bundled example, all notebooks


@pytest.mark.parametrize("name", NAMES)
def test_headless_on_bundled_example(kernel, tmp_path, name):
    if not EXAMPLE.is_dir():
        pytest.skip(f"bundled example not found at {EXAMPLE}")
    params = {"run_fabric_test": False} if name.startswith("08") else {}
    nb, findings = kernel.run(name, tmp_path, **params)  # default evidence = a bundled example
    assert findings is not None, "the notebook wrote no findings file"
    assert nb.metadata.papermill.parameters["interactive"] is False
    text = outputs_text(nb)
    assert "finding(s):" in text or "no findings" in text
    # the example: Xid 79 on GPU 2 (0000:4f:00.0) of gx-a800-102, rank 10; the rest is cascade
    if name.startswith(("00", "06", "09")):
        assert [f for f in findings if f["severity"] == "critical" and f["host"] == "gx-a800-102"], findings
    if name.startswith("01"):  # 01 opens on three hosts' Xid lines: its pickers have hosts and GPUs to pick
        answer = json.loads((REPO / "examples" / "incident-multinode-ecc.answer.json").read_text())
        assert one(findings, xid=48)["gpu_pci"] == answer["gpu_pci"]
        assert one(findings, xid=48)["host"] == answer["host"] and one(findings, xid=48)["severity"] == "critical"
        assert "hq-h100-201" in text and "hq-h100-203" in text  # the Xid 43 of the other nodes are shown too
    if name.startswith("00"):
        assert one(findings, category="gpu_fell_off_bus", host="gx-a800-102")["gpu_index"] == 2


# ---------------------------------------------------------------- corpus incidents, per notebook


def test_00_triage_names_the_fallen_gpu_and_its_host(kernel, tmp_path):
    _, findings = kernel.run("00_triage.ipynb", tmp_path, evidence=case("case-01-xid79-fell-off-bus"))
    root = one(findings, category="gpu_fell_off_bus", host="hgx-h100-018")
    assert root["severity"] == "critical"


def test_00_triage_on_thermal_case_points_at_thermal(kernel, tmp_path):
    nb, findings = kernel.run("00_triage.ipynb", tmp_path, evidence=case("case-02-a100-thermal-throttle"))
    one(findings, category="thermal_throttling")
    assert "04_thermal_power.ipynb" in outputs_text(nb)


def test_00_healthy_run_says_so_and_points_to_checkpoint_and_preflight(kernel, tmp_path):
    nb, findings = kernel.run("00_triage.ipynb", tmp_path, evidence=case("case-07-healthy-run"))
    assert not [f for f in findings if f["severity"] in ("critical", "error")], findings
    text = outputs_text(nb)
    assert "Verdict: NONE interruption" in text and "No failure found" in text


def test_01_on_a_single_log_file(kernel, tmp_path):
    dmesg = INCIDENTS / "case-01-xid79-fell-off-bus" / "input" / "hgx-h100-018" / "dmesg_T.txt"
    if not dmesg.is_file():
        pytest.skip(f"{dmesg} not found")
    _, findings = kernel.run("01_kernel_xid.ipynb", tmp_path, evidence=str(dmesg))
    assert one(findings, xid=79)["gpu_pci"] == "0000:ab:00.0"


def test_00_freezes_the_scene_first_when_asked(kernel, tmp_path):
    """collect_to: capture this (GPU-less) host into a new bundle, then triage that bundle."""
    nb, findings = kernel.run("00_triage.ipynb", tmp_path, collect_to=str(tmp_path / "scene"))
    assert (tmp_path / "scene" / "manifest.json").is_file()
    assert "Captured this host into" in outputs_text(nb) and findings is not None
    with pytest.raises(pm.PapermillExecutionError) as info:  # an existing bundle is never overwritten
        kernel.run("00_triage.ipynb", tmp_path / "again", collect_to=str(tmp_path / "scene"))
    assert info.value.ename == "NotebookStop"


def test_00_drill_mode_hides_the_answer_headless(kernel, tmp_path):
    nb, findings = kernel.run("00_triage.ipynb", tmp_path, evidence=case("case-01-xid79-fell-off-bus"), drill=True)
    text = outputs_text(nb)
    assert "the diagnosis is hidden" in text and "hidden until you commit" in text
    assert "gpu_fell_off_bus" not in text and "Root cause:" not in text  # no answer on screen
    assert "01_kernel_xid.ipynb" not in text and "commit your answer above first" in text  # next step withheld
    # nobody can commit in a headless run, and the archive (findings.json, report) must be complete
    assert one(findings, category="gpu_fell_off_bus")


def test_01_finds_xid79_on_ab_and_shows_drain_and_power_cycle_never_a_reset(kernel, tmp_path):
    nb, findings = kernel.run("01_kernel_xid.ipynb", tmp_path, evidence=case("case-01-xid79-fell-off-bus"))
    xid = one(findings, xid=79)
    assert xid["gpu_pci"] == "0000:ab:00.0" and xid["host"] == "hgx-h100-018" and xid["gpu_index"] == 5
    assert xid["severity"] == "critical" and xid["category"] == "gpu_fell_off_bus"
    text = outputs_text(nb)
    # the catalog: a GPU off the bus is gone from PCIe, a reset cannot reach it; drain, then power-cycle
    assert "nvidia-smi -r" not in text
    assert "[on hgx-h100-018] scontrol update nodename=hgx-h100-018 state=drain" in text
    assert "[on hgx-h100-018] ipmitool chassis power cycle" in text
    assert "Headless run: nothing was executed" in text
    states = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    assert not [m for m in states.values() if m.get("model_name") == "ButtonModel"]


def test_01_ecc_case_finds_xid48_and_94_on_bb(kernel, tmp_path):
    _, findings = kernel.run("01_kernel_xid.ipynb", tmp_path, evidence=case("case-06-ecc-dbe-truncated-ckpt"))
    assert {f["xid"] for f in findings if f.get("gpu_pci") == "0000:bb:00.0"} >= {48, 94}
    assert one(findings, xid=48)["category"] == "gpu_memory_error"


def test_02_cuda_oom_on_rank2(kernel, tmp_path):
    _, findings = kernel.run("02_gpu_memory_oom.ipynb", tmp_path, evidence=case("case-03-cuda-oom-rank2"))
    assert one(findings, category="cuda_oom", rank=2)


def test_02_host_oom_on_trn_h800_01(kernel, tmp_path):
    _, findings = kernel.run("02_gpu_memory_oom.ipynb", tmp_path, evidence=case("case-04-host-oom-killer"))
    assert one(findings, category="host_oom", host="trn-h800-01")


def test_03_socket_fallback_on_node08(kernel, tmp_path):
    _, findings = kernel.run("03_nccl_network.ipynb", tmp_path, evidence=case("case-05-ib-down-socket-fallback"))
    fallback = [f for f in findings if f["category"] == "network_fabric" and f["host"] == "v100-node-08"
                and "socket" in f["title"].lower()]
    assert fallback and fallback[0]["severity"] in ("critical", "error"), findings
    assert not [f for f in findings if f["category"] == "network_fabric" and f["host"] == "v100-node-07"
                and f["severity"] == "critical"]


def test_00_timeline_traces_are_source_kinds_and_every_event_has_a_host(kernel, tmp_path):
    if not EXAMPLE.is_dir():
        pytest.skip(f"bundled example not found at {EXAMPLE}")
    nb, _ = kernel.run("00_triage.ipynb", tmp_path)
    [timeline] = [o["data"]["application/vnd.plotly.v1+json"] for c in nb.cells for o in c.get("outputs", [])
                  if "Incident timeline" in str(o.get("data", {}).get("application/vnd.plotly.v1+json", {}))]
    traces = {t["name"]: t["y"] for t in timeline["data"]}
    assert set(traces) == {"kernel log", "training log", "root cause"}, traces
    assert traces["root cause"] == ["gx-a800-102"]  # the Xid 79, marked
    # the NCCL timeout summary names no host, but its file is gx-a800-101's training log
    assert {y for ys in traces.values() for y in ys} == {"gx-a800-101", "gx-a800-102"}, traces


@pytest.mark.parametrize("name", ["03_nccl_network.ipynb", "06_driver_cuda_ecc_topology.ipynb", "08_preflight.ipynb",
                                  "09_health_report.ipynb"])
def test_version_skew_is_reported_once_from_the_diagnosis(kernel, tmp_path, name):
    evidence = tmp_path / "skew"
    evidence.mkdir()
    for n, (host, version) in enumerate((("sk-1", "2.21.5"), ("sk-2", "2.21.5"), ("sk-3", "2.18.3"))):
        (evidence / f"{host}.log").write_text(
            f"{host}:10:10 [0] NCCL INFO NCCL version {version}+cuda12.4\n"
            f"{host}:10:10 [0] NCCL INFO comm 0x1 rank {n} nranks 3 cudaDev 0 busId 1b000 commId 0x77 - Init COMPLETE\n"
            f"2026-05-04 10:00:00,000 [rank{n}] INFO Training completed\n")
    params = {"run_fabric_test": False} if name.startswith("08") else {}
    _, findings = kernel.run(name, tmp_path / "run", evidence=str(evidence), **params)
    skew = one(findings, category="driver_mismatch")
    assert skew["id"].startswith("version-skew-nccl") and "sk-3: 2.18.3" in skew["title"], skew
    assert [f["id"] for f in findings if f["category"] == "driver_mismatch"] == [skew["id"]]  # said once


def test_03_thermal_case_is_a_cascade_with_rank3_silent(kernel, tmp_path):
    _, findings = kernel.run("03_nccl_network.ipynb", tmp_path, evidence=case("case-02-a100-thermal-throttle"))
    cascade = one(findings, id="nccl-timeout-cascade")
    assert cascade["severity"] == "info" and "did not: 3" in cascade["title"]


def test_04_thermal_throttling_on_gpu3(kernel, tmp_path):
    nb, findings = kernel.run("04_thermal_power.ipynb", tmp_path, evidence=case("case-02-a100-thermal-throttle"))
    figures = [o["data"] for c in nb.cells for o in c.get("outputs", []) if "application/vnd.plotly.v1+json" in
               o.get("data", {})]
    assert figures and all("Plotly.newPlot" in f.get("text/html", "") for f in figures)  # survives HTML export
    shapes = figures[0]["application/vnd.plotly.v1+json"]["layout"]["shapes"]
    assert [s for s in shapes if s["type"] == "rect"]  # the throttle period is shaded
    text = outputs_text(nb)
    assert "nvidia-smi -i 3 -pl 340" in text and "Headless run: nothing was executed" in text  # 85 % of 400 W
    hit = one(findings, category="thermal_throttling", host="dgx-a100-09", gpu_index=3)
    assert hit["gpu_index"] == 3 and hit["host"] == "dgx-a100-09" and hit["time"] == "2025-04-22T12:48:30Z"
    assert not [f for f in findings if f["category"] == "thermal_throttling" and f.get("gpu_index") not in (3, None)]


def test_04_healthy_run_has_no_thermal_findings(kernel, tmp_path):
    _, findings = kernel.run("04_thermal_power.ipynb", tmp_path, evidence=case("case-07-healthy-run"))
    assert not [f for f in findings if f["severity"] in ("critical", "error")], findings


def test_05_rank3_straggles_in_the_thermal_case(kernel, tmp_path):
    _, findings = kernel.run("05_data_loading.ipynb", tmp_path, evidence=case("case-02-a100-thermal-throttle"))
    assert one(findings, category="data_pipeline_stall", rank=3)


def test_05_steady_steps_in_the_ecc_case(kernel, tmp_path):
    _, findings = kernel.run("05_data_loading.ipynb", tmp_path, evidence=case("case-06-ecc-dbe-truncated-ckpt"),
                             stall_factor=3.0)
    assert not [f for f in findings if f["severity"] in ("critical", "error")]


def test_06_pending_remap_on_gpu5(kernel, tmp_path):
    _, findings = kernel.run("06_driver_cuda_ecc_topology.ipynb", tmp_path,
                             evidence=case("case-06-ecc-dbe-truncated-ckpt"))
    ecc = one(findings, category="gpu_memory_error", gpu_index=5, host="h100-sxm-c05")
    assert ecc["severity"] == "critical"


def test_06_lost_gpu_in_the_xid79_case(kernel, tmp_path):
    _, findings = kernel.run("06_driver_cuda_ecc_topology.ipynb", tmp_path, evidence=case("case-01-xid79-fell-off-bus"))
    assert [f for f in findings if f["severity"] == "critical" and f["host"] == "hgx-h100-018"]


def test_07_resume_from_step_4000(kernel, tmp_path):
    nb, findings = kernel.run("07_checkpoint_resume.ipynb", tmp_path, evidence=case("case-06-ecc-dbe-truncated-ckpt"))
    resume = one(findings, id="resume-from")
    assert resume["resume_from"].endswith("checkpoints/ckpt_step_004000.pt")
    # headless, the picker shows the recommended one: steps lost and the command alone on a line
    text = outputs_text(nb)
    assert "ckpt_step_004000.pt: RESUME FROM THIS" in text and "steps lost: 2000 (last logged step 6000" in text
    assert resume["actions"][0] in text.splitlines()
    assert any("--resume" in a and "ckpt_step_004000.pt" in a for a in resume["actions"])
    rejected = [f for f in findings if f["id"].startswith("rejected")]
    assert rejected and "ckpt_step_006000.pt" in rejected[0]["title"] and "truncated" in rejected[0]["title"]


def test_07_evidence_without_checkpoints_is_a_warning_not_a_lost_job(kernel, tmp_path):
    _, findings = kernel.run("07_checkpoint_resume.ipynb", tmp_path, evidence=case("case-07-healthy-run"))
    missing = one(findings, id="no-checkpoints-in-evidence")
    assert missing["severity"] == "warning" and any("checkpoint_dirs" in a for a in missing["actions"])
    assert not [f for f in findings if f["id"] == "no-valid-checkpoint"]


def test_07_only_broken_checkpoints_is_critical(tmp_path):
    from gpulib.checkpoints import find_latest
    from gpulib.notebook import steps as checks

    (tmp_path / "ckpt_step_000100.pt").write_bytes(b"PK\x03\x04" + b"\0" * 200)  # a save cut after 204 bytes
    findings = checks.checkpoint_findings(find_latest([tmp_path]))
    assert one(findings, id="no-valid-checkpoint")["severity"] == "critical"
    assert any(f["id"].startswith("rejected") and "ckpt_step_000100.pt" in f["title"] for f in findings)


def test_08_preflight_no_go_on_the_fallen_node(kernel, tmp_path):
    _, findings = kernel.run("08_preflight.ipynb", tmp_path, evidence=case("case-01-xid79-fell-off-bus"),
                             run_fabric_test=False)
    assert one(findings, id="preflight-verdict")["verdict"] == "NO-GO"
    assert one(findings, id="fabric-not-tested")["severity"] == "warning"


def test_08_preflight_runs_the_gloo_fabric_test_on_a_healthy_node(kernel, tmp_path):
    pytest.importorskip("torch")
    nb, findings = kernel.run("08_preflight.ipynb", tmp_path, evidence=case("case-07-healthy-run"), nproc=2)
    fabric = one(findings, id="fabric-test")
    assert fabric["fabric"]["backend"] == "gloo" or fabric["fabric"]["verdict"] != "FAIL", fabric
    assert fabric["fabric"]["verdict"] in ("PASS", "WARN"), fabric["fabric"]["log_tail"]
    assert one(findings, id="preflight-verdict")["verdict"] == "GO", findings
    mime = "application/vnd.plotly.v1+json"
    curves = [json.loads(o["data"][mime]) if isinstance(o["data"][mime], str) else o["data"][mime]
              for cell in nb.cells for o in cell.get("outputs", []) if mime in o.get("data", {})]
    busbw = [c for c in curves if "Bus bandwidth" in str(c.get("layout", {}).get("title"))]
    assert busbw and {t["name"] for t in busbw[0]["data"]} >= {"out-of-place"}, "busbw curve of the fabric test is shown"


def test_08_preflight_on_a_live_capture_of_this_gpu_less_host(kernel, tmp_path):
    """capture_live: collect this host now. No GPU is visible here, which is a no-go (a relaunch
    would fail at the first CUDA call), and the only blocking finding: no hardware fault is invented."""
    nb, findings = kernel.run("08_preflight.ipynb", tmp_path, capture_live=True, run_fabric_test=False)
    assert "Captured this host into" in outputs_text(nb)
    blocking = [f["id"] for f in findings if f["severity"] == "critical" and f["id"] != "preflight-verdict"]
    assert blocking == ["no-gpu-visible"], findings
    assert one(findings, id="preflight-verdict")["verdict"] == "NO-GO"


def test_09_health_report_flags_the_fallen_host_and_the_hot_gpu(kernel, tmp_path):
    _, bad = kernel.run("09_health_report.ipynb", tmp_path / "a", evidence=case("case-01-xid79-fell-off-bus"))
    assert [f for f in bad if f["severity"] == "critical" and f["host"] == "hgx-h100-018"]
    _, hot = kernel.run("09_health_report.ipynb", tmp_path / "b", evidence=case("case-02-a100-thermal-throttle"))
    assert one(hot, category="thermal_throttling", gpu_index=3)


# ---------------------------------------------------------------- failure modes


def test_bad_evidence_path_gives_a_clear_message_not_a_dead_kernel(kernel, tmp_path):
    with pytest.raises(pm.PapermillExecutionError) as info:
        kernel.run("01_kernel_xid.ipynb", tmp_path, evidence="/nonexistent/incident-42")
    assert info.value.ename == "NotebookStop"
    assert "evidence path not found" in info.value.evalue
    nb = nbformat.read(tmp_path / "01_kernel_xid.ipynb", as_version=4)
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert len(errors) == 1
    shown = "\n".join(errors[0]["traceback"])
    assert "what to do:" in shown and "Traceback" not in shown and len(errors[0]["traceback"]) <= 4
    nb2, findings = kernel.run("04_thermal_power.ipynb", tmp_path / "after", evidence=case("case-02-a100-thermal-throttle"))
    assert findings  # the same kernel still works


# ---------------------------------------------------------------- interactive mode


@pytest.mark.parametrize(("name", "evidence", "extra", "expected_models"), [
    ("00_triage.ipynb", "case-01-xid79-fell-off-bus", {}, {"DropdownModel", "SelectionRangeSliderModel", "OutputModel"}),
    ("00_triage.ipynb", "case-01-xid79-fell-off-bus", {"drill": True}, {"DropdownModel", "ButtonModel", "OutputModel"}),
    # the power-cap command is for dgx-a100-09, not this machine: shown, with no confirmation box or
    # button (nothing here can run it; see the thermal branch below)
    ("04_thermal_power.ipynb", "case-02-a100-thermal-throttle", {}, {"DropdownModel", "FloatSliderModel"}),
    ("07_checkpoint_resume.ipynb", "case-06-ecc-dbe-truncated-ckpt", {}, {"DropdownModel", "TextareaModel"}),
], ids=["triage", "triage-drill", "thermal", "checkpoint"])
def test_interactive_mode_creates_widgets_without_error(tmp_path, name, evidence, extra, expected_models):
    nb = pm.execute_notebook(str(NOTEBOOKS / name), str(tmp_path / name), prepare_only=True, kernel_name="python3",
                             progress_bar=False, parameters={"evidence": case(evidence), "interactive": True,
                                                             "findings_path": str(tmp_path / "f.json"), **extra})
    NotebookClient(nb, kernel_name="python3", timeout=90, startup_timeout=120,  # a widget stall fails
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    assert expected_models <= {m["model_name"] for m in state.values()}
    if extra.get("drill"):
        text = outputs_text(nb)  # the picker lists every category; the answer waits for the commit button
        assert "(answer:" not in text and "Root cause:" not in text and "written to" in text
        assert not (tmp_path / "f.json").exists(), "a live drill writes its findings (the answer) at the commit"
        hosts = [m["state"].get("_options_labels") for m in state.values() if m["state"].get("description") == "host"]
        assert hosts and {"hgx-h100-017", "hgx-h100-018"} <= set(hosts[0]), hosts  # not only the culprit's host
    else:
        assert (tmp_path / "f.json").exists()
    if name.startswith("04"):
        text = outputs_text(nb)
        assert "[on dgx-a100-09] nvidia-smi -i 3 -pl " in text and "0 of 1 can run here" in text, text
        assert not {"CheckboxModel", "ButtonModel"} & {m["model_name"] for m in state.values()}


# ---------------------------------------------------------------- source hygiene and nbval


@pytest.mark.parametrize("name", NAMES)
def test_source_is_committed_without_outputs_and_with_typed_parameters(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{name}: cell has outputs"
    params = pm.inspect_notebook(str(NOTEBOOKS / name))
    assert {"evidence", "interactive", "findings_path"} <= set(params)
    assert params["interactive"]["inferred_type_name"] == "bool" and params["interactive"]["default"] == "True"
    assert params["findings_path"]["default"] == f'"findings-{name[:2]}.json"'
    assigned = {line.split(":")[0].split("=")[0].strip() for line in nb.cells[1].source.splitlines()
                if line and not line.startswith("#")}
    assert assigned == set(params), f"{name}: papermill cannot read {assigned - set(params)} (a '=' in the comment?)"
    for p in params.values():
        assert p["inferred_type_name"] != "None" and p["help"], f"{name}: parameter {p['name']} lacks type or help"
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith(f"# {name[:2]} ·")
    assert "What next" in nb.cells[-1].source or "What next" in nb.cells[-2].source


def test_nbval_lax_smoke_on_the_source_notebooks(tmp_path):
    """`pytest --nbval-lax --nbval-current-env` on copies (they write findings beside themselves)."""
    if not EXAMPLE.is_dir():
        pytest.skip(f"bundled example not found at {EXAMPLE}")
    copies = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOKS, copies, ignore=shutil.ignore_patterns("08_*", ".ipynb_checkpoints"))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
                           "--nbval-current-env", "--nbval-cell-timeout=240", "-o", "addopts=", str(copies)],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=540, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert sorted(p.name for p in copies.glob("findings-*.json")) == [
        f"findings-{n[:2]}.json" for n in NAMES if not n.startswith("08")]
