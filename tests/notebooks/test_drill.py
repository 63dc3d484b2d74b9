"""Drill mode without a kernel: the pickers offer the whole evidence, nothing that holds the answer
is on screen or on disk before the commit, each facet is scored apart, hints and retries come
before the reveal, and "What next" follows it."""

from __future__ import annotations

import json

import pytest

from gpulib.notebook import drill_grading as grading
from gpulib.notebook import face as nbk
from gpulib.notebook import steps as checks
from gpulib.notebook.drill import Drill
from gpulib.notebook.tables import DEFAULT_EVIDENCE, open_evidence
from gpulib.vocabulary import CATEGORIES
from tests.conftest import REPO

EXAMPLE = REPO / DEFAULT_EVIDENCE
#: The bundled example: Xid 79 on GPU 2 (0000:4f:00.0) of gx-a800-102, rank 10; after the crash
#: nvidia-smi renumbered the survivors, so its "GPU 2" is 0000:54:00.0.
HOST, PCI, RANK = "gx-a800-102", "0000:4f:00.0", 10


@pytest.fixture(scope="module")
def ev():
    if not EXAMPLE.is_dir():
        pytest.skip(f"bundled example not found at {EXAMPLE}")
    return open_evidence(str(EXAMPLE))


@pytest.fixture
def quiet(monkeypatch, tmp_path):
    """Collect what face displays instead of printing it; run in a folder of its own (a live drill
    writes its score file into the notebook's folder, the kernel's working directory)."""
    monkeypatch.chdir(tmp_path)
    shown = []
    monkeypatch.setattr(nbk, "display", lambda obj, **kw: shown.append(obj))
    return shown


def gpu(drill: Drill, host: str, pci: str):
    return next(g for g in drill.choices.gpus if g.host == host and g.pci == pci)


def answer(drill: Drill, **override) -> None:
    """Pick the right answer on every facet, except those overridden."""
    picks = {"category": "gpu_fell_off_bus", "interruption": "hard", "host": HOST, "gpu": gpu(drill, HOST, PCI),
             "rank": RANK, **override}
    for facet, value in picks.items():
        drill.pickers[facet].value = value


def labels(dropdown) -> list[str]:
    return [label for label, _ in dropdown.options]


def test_pickers_offer_every_host_gpu_and_rank_of_the_evidence(ev, quiet):
    drill = nbk.show_diagnosis(ev.diagnosis, interactive=True, drill=True, evidence=ev)
    input_hosts = set(ev.inputs()["host"].dropna())
    assert input_hosts == {"gx-a800-101", HOST}
    assert input_hosts <= set(labels(drill.pickers["host"]))
    assert {f"rank {r}" for r in range(16)} <= set(labels(drill.pickers["rank"]))
    gpus = labels(drill.pickers["gpu"])
    ranks = ev.ranks()
    for _, r in ranks.iterrows():  # every GPU of the rank map, named by host, index and PCI id
        assert f"{r['host']} {r['gpu_name']}" in gpus  # named as in every figure and table
    # the lost GPU keeps the index the job saw; the renumbered survivor is not a second "GPU 2"
    assert f"{HOST} {PCI} (GPU 2 in the job)" in gpus
    assert f"{HOST} 0000:54:00.0 (GPU 2 at capture, 3 in the job)" in gpus
    assert "no single host" in labels(drill.pickers["host"]) and "(pick one)" in labels(drill.pickers["gpu"])
    assert [v for _, v in drill.pickers["category"].options][1:] == list(CATEGORIES)
    # offered in words, the id after them
    assert labels(drill.pickers["category"])[1] == "a GPU fell off the bus (PCIe link lost, Xid 79) [gpu_fell_off_bus]"
    assert [v for _, v in drill.pickers["interruption"].options][1:] == ["hard", "soft", "none", "unknown"]


def test_choices_from_the_diagnosis_alone_still_list_every_host():
    diagnosis = {"verdict": {"interruption": "soft", "category": "cuda_oom"},
                 "root_cause": {"host": "n3", "rank": 2, "gpu_index": 2},
                 "inputs": [{"host": "n1"}, {"host": "n2"}, {"host": None}],
                 "findings": [{"host": "n2", "gpu_index": 0, "gpu_pci": "00000000:1B:00.0", "rank": 5}],
                 "timeline": [{"host": "n4"}]}
    diagnosis["findings"].append({"host": "n1", "category": "network_fabric", "gpu_pci": "0000:5c:00.0"})  # a NIC
    choices = grading.drill_choices(diagnosis)
    assert choices.hosts == ("n1", "n2", "n3", "n4")
    assert [g.label() for g in choices.gpus] == ["n2 0000:1b:00.0 (GPU 0)", "n3 GPU 2"]
    assert choices.ranks == (2, 5)


def test_nothing_is_written_or_shown_before_the_commit(ev, quiet, tmp_path):
    path = tmp_path / "findings-00.json"
    path.write_text(json.dumps([{"id": "old", "category": "gpu_fell_off_bus", "title": "the answer"}]))
    drill = nbk.show_diagnosis(ev.diagnosis, interactive=True, drill=True, evidence=ev)
    recorded = nbk.record(checks.from_diagnosis(ev.diagnosis), path, step="00_triage", drill=drill)
    assert not path.exists(), "an earlier run's findings (the answer) stayed in the file browser"
    nbk.next_step(ev.diagnosis, drill=drill)
    on_screen = json.dumps([o for o in quiet if isinstance(o, dict)])
    assert "gpu_fell_off_bus" not in on_screen and PCI not in on_screen and "earlier run" in on_screen
    assert recorded and not drill.revealed

    answer(drill, gpu=gpu(drill, HOST, "0000:54:00.0"))  # one facet wrong: a hint, no reveal
    drill.commit.click()
    assert not drill.revealed and not path.exists()
    hints = "\n".join(m.hint for m in drill.attempts[-1])
    assert PCI not in hints and HOST not in hints and "rank 10" not in hints  # the hint is not the answer

    drill.show_answer.click()
    assert drill.revealed
    on_disk = json.loads(path.read_text())
    assert on_disk == recorded and any(f["category"] == "gpu_fell_off_bus" and f["host"] == HOST for f in on_disk)


def test_next_step_appears_only_after_the_reveal(ev, quiet, tmp_path):
    drill = nbk.show_diagnosis(ev.diagnosis, interactive=True, drill=True, evidence=ev)
    nbk.next_step(ev.diagnosis, drill=drill)
    shown = [o for o in quiet if o is drill.next_out]
    assert shown, "the next step's output area is displayed in the What next cell"
    before = json.dumps(drill.next_out.outputs)
    assert "01_kernel_xid" not in before and "commit your answer" in before
    answer(drill)
    drill.commit.click()
    after = json.dumps(drill.next_out.outputs)
    assert drill.revealed and "01_kernel_xid.ipynb" in after and "commit your answer" not in after


def test_each_facet_is_scored_apart_with_why(ev):
    choices = grading.drill_choices(ev.diagnosis, ev.ranks(), ev.gpu_states())
    drill = Drill(ev.diagnosis, CATEGORIES, choices, max_attempts=1)
    answer(drill, category="network_fabric", rank=0)
    drill.commit.click()
    marks = {m.facet: m for m in drill.attempts[0]}
    assert grading.score(drill.attempts[0]) == (3, 5)
    assert [f for f, m in marks.items() if m.right] == ["interruption", "host", "gpu"]
    assert "cascade" in marks["category"].why  # the trainee read the cascade as the cause
    assert "journal-kernel.txt:20" in marks["host"].why and PCI in marks["gpu"].why
    assert f"rank 10 ran on {HOST} {PCI} (GPU 2)" in marks["rank"].why
    text = drill.result_text
    assert "Drill result: 3 / 5 on the first attempt" in text
    assert ("root-cause category: network fabric (InfiniBand / RoCE link, NIC) [network_fabric] -> WRONG (answer: a GPU "
            "fell off the bus (PCIe link lost, Xid 79) [gpu_fell_off_bus]) [0/1]") in text
    assert f"culprit GPU: {HOST} {PCI} (GPU 2) -> right [1/1]" in text
    assert "culprit rank: rank 0 -> WRONG (answer: rank 10)" in text
    quoted = text.split("Lines you should have used (file:line: text):\n", 1)[1]  # the key's quoted lines
    assert quoted.startswith("  ") and "journal-kernel.txt:20: " in quoted


def test_retry_keeps_the_right_picks_and_reveals_when_all_are_right(ev):
    drill = Drill(ev.diagnosis, CATEGORIES, grading.drill_choices(ev.diagnosis, ev.ranks(), ev.gpu_states()))
    answer(drill, interruption="soft", rank=9)
    drill.commit.click()
    assert not drill.revealed and drill.commit.disabled and drill.pickers["rank"].disabled
    assert not drill.retry.disabled and not drill.show_answer.disabled
    drill.retry.click()
    assert not drill.commit.disabled and drill.pickers["host"].value == HOST  # right picks kept
    drill.pickers["interruption"].value = "hard"
    drill.pickers["rank"].value = RANK
    drill.commit.click()
    assert drill.revealed and [grading.score(a)[0] for a in drill.attempts] == [3, 5]
    assert drill.result_text.startswith("Drill result: 3 / 5 on the first attempt, 5 / 5 on attempt 2")
    assert drill.commit.disabled and drill.retry.disabled and drill.show_answer.disabled
    drill.retry.click()  # nothing after the reveal
    assert drill.commit.disabled


def test_the_answer_is_revealed_when_the_attempts_run_out(ev):
    drill = Drill(ev.diagnosis, CATEGORIES, grading.drill_choices(ev.diagnosis), max_attempts=2)
    drill.commit.click()  # nothing picked: every facet "not answered"
    # the diagnosis alone names one rank: that question would be a free point, it is not asked
    assert grading.score(drill.attempts[0]) == (0, 4) and not drill.revealed
    assert "culprit host: (not answered) -> WRONG\n      hint: " in drill.out.outputs[-1]["text"]
    drill.retry.click()
    drill.commit.click()
    assert drill.revealed and "[gpu_fell_off_bus]" in drill.result_text


def test_a_job_wide_cause_is_answered_with_no_single_gpu():
    diagnosis = {"verdict": {"interruption": "soft", "category": "host_oom", "summary": "the kernel OOM killer"},
                 "root_cause": {"category": "host_oom", "host": "n1", "gpu_index": None, "rank": None,
                                "evidence": [{"file": "n1/kern.log", "line": 3, "text": "Out of memory: Killed process"}]},
                 "inputs": [{"host": "n1"}, {"host": "n2"}],
                 "findings": [{"host": "n1", "gpu_index": 0, "rank": 0}, {"host": "n2", "gpu_index": 0, "rank": 1}]}
    choices = grading.drill_choices(diagnosis)
    drill = Drill(diagnosis, CATEGORIES, choices)
    for facet, value in {"category": "host_oom", "interruption": "soft", "host": "n1", "gpu": grading.NOBODY,
                         "rank": grading.NOBODY}.items():
        drill.pickers[facet].value = value
    drill.commit.click()
    assert drill.revealed and grading.score(drill.attempts[0]) == (5, 5)
    assert "no single GPU -> right" in drill.result_text and "not one GPU" in drill.result_text


def test_headless_drill_writes_the_archive_but_shows_no_answer(ev, quiet, tmp_path):
    challenge = nbk.show_diagnosis(ev.diagnosis, interactive=False, drill=True, evidence=ev)
    assert challenge is True
    path = tmp_path / "findings-00.json"
    nbk.record(checks.from_diagnosis(ev.diagnosis), path, step="00_triage", drill=challenge)
    assert json.loads(path.read_text())  # the runbook's findings.json and report need it
    nbk.next_step(ev.diagnosis, drill=challenge)
    shown = json.dumps([o if isinstance(o, dict) else getattr(o, "data", str(o)) for o in quiet])
    assert "gpu_fell_off_bus" not in shown and "01_kernel_xid" not in shown and "hidden" in shown


def test_without_drill_the_verdict_and_findings_are_shown(ev, quiet, tmp_path):
    assert nbk.show_diagnosis(ev.diagnosis, interactive=True) is False
    nbk.record(checks.from_diagnosis(ev.diagnosis), tmp_path / "f.json", step="00_triage", drill=False)
    assert "Verdict: HARD interruption" in quiet[0]["text/plain"]
    assert "Quoted lines (file:line: text):\n  " in quiet[0]["text/plain"]  # the root cause's own lines
    assert "gpu_fell_off_bus" in json.dumps(quiet[1]["application/vnd.gpulib.finding+json"])


def test_grading_accepts_every_answer_the_evidence_supports():
    """The IB example: the diagnosis says soft with no single rank, while its output says rank(s) 2, 3
    never arrived: "rank 2" is what that output teaches. Its port is an error to fix, not a critical
    part to drain (one verdict everywhere), so "hard" has nothing to support it and stays wrong."""
    ev = open_evidence(REPO / "examples" / "incident-ib-port-down")
    choices = grading.drill_choices(ev.diagnosis, ev.ranks(), ev.gpu_states(), ev.gpu_palette().short)
    key = grading.AnswerKey.from_diagnosis(ev.diagnosis, choices)
    assert key.interruption == "soft" and key.rank is None
    marks = {m.facet: m for m in grading.grade({"category": "network_fabric", "interruption": "hard", "host": key.host,
                                                 "gpu": grading.NOBODY, "rank": 2}, key, choices)}
    assert marks["rank"].right and "never arrived" in marks["rank"].why
    assert not marks["interruption"].right
    root = next(f for f in ev.diagnosis["findings"] if f["id"] == ev.diagnosis["root_cause"]["finding"])
    assert root["severity"] == "error" and not any("drain" in a.lower() for a in root["actions"])
    assert not grading.grade({"rank": 5}, key, choices)[-1].right  # a rank that waited is still wrong
    soft = grading.grade({"interruption": "soft", "rank": grading.NOBODY}, key, choices)
    assert [m.right for m in soft if m.facet in ("interruption", "rank")] == [True, True]


def test_a_one_host_incident_does_not_ask_the_host(tmp_path):
    diagnosis = {"verdict": {"interruption": "soft", "category": "cuda_oom", "summary": "OOM"},
                 "root_cause": {"category": "cuda_oom", "host": "n1", "gpu_index": 1, "gpu_pci": "0000:1b:00.0",
                                "rank": 1, "evidence": []},
                 "inputs": [{"host": "n1"}],
                 "findings": [{"host": "n1", "gpu_index": 0, "gpu_pci": "0000:0a:00.0", "rank": 0},
                              {"host": "n1", "gpu_index": 1, "gpu_pci": "0000:1b:00.0", "rank": 1}]}
    choices = grading.drill_choices(diagnosis)
    drill = Drill(diagnosis, CATEGORIES, choices, folder=tmp_path)
    assert [f for f, _ in grading.asked_facets(choices)] == ["category", "interruption", "gpu", "rank"]
    drill.pickers["category"].value = "cuda_oom"
    drill.commit.click()
    assert [m.facet for m in drill.attempts[0]] == ["category", "interruption", "gpu", "rank"]
    score = json.loads((tmp_path / "drill-score.json").read_text())  # what a trainer collects, per attempt
    assert score["attempts"][0]["points"] == 1 and score["attempts"][0]["out_of"] == 4
    assert score["attempts"][0]["answers"]["category"]["right"] and "answer" not in score  # no key before the reveal
    drill.show_answer.click()
    score = json.loads((tmp_path / "drill-score.json").read_text())
    assert score["revealed"] and score["answer"]["rank"] == "rank 1"


def test_the_next_steps_appear_beside_the_drill_only_at_the_reveal(ev, tmp_path):
    held = tmp_path / ".gpulib-drill-next-steps"
    held.mkdir()
    (held / "01_kernel_xid.ipynb").write_text("{}")
    drill = Drill(ev.diagnosis, CATEGORIES, grading.drill_choices(ev.diagnosis, ev.ranks(), ev.gpu_states()),
                  folder=tmp_path)
    answer(drill, rank=9)
    drill.commit.click()
    assert not drill.revealed and not (tmp_path / "01_kernel_xid.ipynb").exists()
    drill.show_answer.click()
    assert (tmp_path / "01_kernel_xid.ipynb").is_file() and not held.exists()
    assert "01_kernel_xid.ipynb" in drill.result_text
