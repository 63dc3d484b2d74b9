"""The health report's trends (issue 17, issue 20): BMC power history per node, /dev/shm and data /
checkpoint usage per node, and each recorded nccl-tests run beside the bandwidth model's curve.
Data functions in ``gpulib.notebook.tables``, figures in ``figures``/``figures_nccl``; evidence
written in the tools' layouts (our own hosts, times and sizes; the nccl-tests files are the
fixtures of tests/nccl)."""

from __future__ import annotations

import shutil

import pandas as pd

from gpulib.notebook import figures, figures_nccl, tables
from tests.conftest import REPO
from tests.diagnose.test_rules_power_shm import BMC_NOW, DF_FULL, SEL_HISTORY, SEL_INCIDENT, STAT_FULL, bundle, job

NCCL_FIXTURES = REPO / "tests" / "nccl" / "fixtures"


def evidence(tmp_path):
    job(tmp_path)
    bundle(tmp_path, "pw-a", {"ipmi/sel-elist.txt": SEL_HISTORY, "ipmi/sel-time.txt": BMC_NOW,
                              "filesystems/df-h.txt": DF_FULL.replace("64M   64M     0 100%", "32G  2.5G   30G   8%")})
    bundle(tmp_path, "pw-b", {"ipmi/sel-elist.txt": SEL_HISTORY + SEL_INCIDENT, "ipmi/sel-time.txt": BMC_NOW,
                              "filesystems/df-h.txt": DF_FULL, "filesystems/stat-f.txt": STAT_FULL})
    for name in ("allreduce_8xh100_current_layout_healthy.txt", "allreduce_8xh100_current_layout_slow_nvlink.txt"):
        shutil.copy(NCCL_FIXTURES / name, tmp_path / "evidence" / name)
    return tables.open_evidence(tmp_path / "evidence")


def test_sel_events_per_node_on_utc_with_losses_and_recoveries(tmp_path):
    ev = evidence(tmp_path)
    sel = ev.sel_events()
    assert set(sel["kind"]) == {"loss", "restored"}
    b = sel[(sel["host"] == "pw-b") & (sel["kind"] == "loss")].sort_values("time")
    # BMC two hours ahead plus 42 s: 12:06:12 on its clock is 10:05:30 UTC
    assert b["time"].iloc[-3] == pd.Timestamp("2026-05-04T10:05:30Z")
    assert b["clock"].iloc[0].startswith("BMC clock 2 h 0 min ahead of UTC")
    summary = tables.sel_summary(sel)
    assert summary.to_dict("records")[0] | {"first": None, "last": None} == {
        "host": "pw-b", "losses": 5, "restored": 3, "still_lost": 2, "first": None, "last": None}
    assert summary.set_index("host").loc["pw-a", "still_lost"] == 0
    fig = figures.sel_power_events(sel)
    names = [t.name for t in fig.data if t.name]
    assert names == ["loss", "restored"] and len(fig.data) == 7  # 5 outages drawn loss -> restored, 2 marker traces


def test_storage_usage_prefers_stat_f_and_marks_the_full_shm(tmp_path):
    ev = evidence(tmp_path)
    usage = ev.storage_usage()
    shm = usage[usage["path"] == "/dev/shm"].set_index("host")
    assert shm.loc["pw-b", "source"] == "statfs" and shm.loc["pw-b", "size_gib"] == 16384 * 4096 / 2**30
    assert bool(shm.loc["pw-b", "full"]) and not bool(shm.loc["pw-a", "full"])
    assert usage["time"].notna().all() and (usage["time"] == pd.Timestamp("2026-05-04T11:00:00Z")).all()
    fig = figures.storage_usage(usage)
    assert {t.type for t in fig.data} == {"bar"} and "/dev/shm" in {t.name for t in fig.data}


def test_storage_over_several_captures_draws_a_trend(tmp_path):
    rows = [{"time": pd.Timestamp(f"2026-05-0{d}T02:00:00Z"), "host": "pw-b", "path": "/mnt/ckpt", "use_pct": pct,
             "size_gib": 100.0, "used_gib": pct} for d, pct in ((1, 70.0), (2, 81.0), (3, 93.0))]
    fig = figures.storage_usage(pd.DataFrame(rows))
    assert [t.type for t in fig.data] == ["scatter"] and list(fig.data[0].y) == [70.0, 81.0, 93.0]


def test_nccl_runs_carry_the_model_curve_beside_the_measured_one(tmp_path):
    ev = evidence(tmp_path)
    runs = {r["file"]: r for r in ev.nccl_runs()}
    healthy = runs["allreduce_8xh100_current_layout_healthy.txt"]
    slow = runs["allreduce_8xh100_current_layout_slow_nvlink.txt"]
    assert healthy["status"] == "PASS" and slow["status"] in ("WARN", "FAIL")
    assert healthy["expected"] and {s for s, _ in healthy["expected"]} == {s for s, _ in healthy["series"]["out-of-place"]}
    fig = figures_nccl.busbw_figure(slow["series"], expected=slow["expected"])
    assert [t.name for t in fig.data][-1] == "expected (model)" and fig.data[-1].line.dash == "dash"
    # the slow run stays far below the model at its largest size
    largest = max(slow["series"]["out-of-place"])
    assert largest[1] < 0.7 * dict(slow["expected"])[largest[0]]


def test_empty_evidence_gives_figures_that_say_so(tmp_path):
    (tmp_path / "x.log").write_text("2026-05-04 10:00:00,000 INFO step 1 | loss 2.0\n")
    ev = tables.open_evidence(tmp_path)
    assert ev.sel_events().empty and ev.storage_usage().empty and ev.nccl_runs() == []
    assert "no BMC event log" in figures.sel_power_events(ev.sel_events()).layout.annotations[0].text
    assert "no df / stat -f" in figures.storage_usage(ev.storage_usage()).layout.annotations[0].text
    assert tables.sel_summary(ev.sel_events()).empty
