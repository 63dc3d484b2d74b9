"""What the notebooks mean on screen, on a real ``jupyter lab`` (started as root in CI, with
``--allow-root``), driven by Playwright in Debian's Chromium.

Not "it rendered" but "it says the right thing": one name per physical GPU across the panels of
a renumbering incident, labels that do not sit on each other, the culprit's row highlighted, no
identifier broken over two lines, figures whose first draw shows their data in range, and a
drill whose answer cannot be reached before the commit while every supported answer is right.
"""

from __future__ import annotations

import json
import re
import urllib.error
from datetime import datetime

import pytest

from gpulib.notebook.cli import prepare
from gpulib.notebook.drill_grading import category_label
from tests.browser.chromium import screenshot_check
from tests.browser.conftest import set_parameters
from tests.browser.test_lab_notebooks import options, pick, run_notebook
from tests.conftest import REPO

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300), pytest.mark.usefixtures("fresh_kernels")]

PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"
#: Per drawn graph: legend names, x data (as plotly drew it), the x-axis range and type, and the
#: boxes of its annotations (the "lost at" label, threshold lines' labels) for the overlap check.
GRAPHS = f"""() => [...document.querySelectorAll('{PANEL} .js-plotly-plot')].filter(g => g._fullLayout).map(g => {{
  const box = e => {{ const r = e.getBoundingClientRect();
                     return {{text: e.textContent, x: r.x, y: r.y, w: r.width, h: r.height}}; }};
  return {{title: (g._fullLayout.title || {{}}).text || '',
          names: g._fullData.filter(t => t.meta && t.meta.gpu).map(t => t.name),
          xs: g._fullData.filter(t => t.visible !== false).map(t => Array.from(t.x || [], String)),
          range: (g._fullLayout.xaxis || {{}}).range, type: (g._fullLayout.xaxis || {{}}).type,
          annotations: [...g.querySelectorAll('g.annotation')].map(box)}};
}})"""
#: Table cells meant to stay on one line (identifiers) whose text the browser laid out on several.
BROKEN_CELLS = f"""() => [...document.querySelectorAll('{PANEL} table.gpulib-table td')]
  .filter(td => td.style.whiteSpace === 'nowrap' && td.textContent.trim())
  .filter(td => {{ const r = document.createRange(); r.selectNodeContents(td);
                   return new Set([...r.getClientRects()].map(x => Math.round(x.top))).size > 1; }})
  .map(td => td.textContent)"""
CULPRIT_ROWS = f"""() => [...document.querySelectorAll('{PANEL} table.gpulib-table tr.gpulib-culprit')].map(tr => ({{
  text: tr.textContent, background: getComputedStyle(tr).backgroundColor}}))"""


def _overlaps(boxes: list[dict]) -> list[tuple[str, str]]:
    hits = []
    for n, a in enumerate(boxes):
        for b in boxes[n + 1:]:
            if a["w"] and b["w"] and a["x"] < b["x"] + b["w"] - 1 and b["x"] < a["x"] + a["w"] - 1 \
                    and a["y"] < b["y"] + b["h"] - 1 and b["y"] < a["y"] + a["h"] - 1:
                hits.append((a["text"], b["text"]))
    return hits


def _pci_names(graphs: list[dict]) -> dict[str, set[str]]:
    """PCI id -> every name a figure gave that GPU (the host dropped: a one-host chart omits it)."""
    out: dict[str, set[str]] = {}
    for graph in graphs:
        for name in graph["names"]:
            found = re.search(r"([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) \([^)]*\)", name)
            if found:
                out.setdefault(found[1], set()).add(found[0])
    return out


def _in_range(graph: dict) -> None:
    """Every drawn x value inside the axis range, and the data filling most of it."""
    xs = [x for trace in graph["xs"] for x in trace if x not in ("", "null")]
    if not xs or not graph["range"] or graph["type"] != "date":
        return
    lo, hi = (datetime.fromisoformat(v.replace(" ", "T")[:26]) for v in graph["range"])
    stamps = sorted(datetime.fromisoformat(x.replace(" ", "T")[:26]) for x in xs)
    assert lo <= stamps[0] and stamps[-1] <= hi, (graph["title"], graph["range"], stamps[0], stamps[-1])
    if stamps[-1] > stamps[0]:
        assert (stamps[-1] - stamps[0]) / (hi - lo) > 0.8, (graph["title"], graph["range"], stamps[0], stamps[-1])


@pytest.mark.parametrize("name", ["01_kernel_xid.ipynb", "04_thermal_power.ipynb", "07_checkpoint_resume.ipynb"])
def test_first_run_all_draws_the_data_in_range(lab, page, name):
    """Run All with the shipped defaults: a figure with data, its axis fitted to it on the first draw."""
    run_notebook(page, lab, set_parameters(lab, name, save_as=f"first-{name}"), f"first-{name[:2]}")
    with screenshot_check(page, f"first-{name[:2]}-3-in-range"):
        page.locator(f"{PANEL} .js-plotly-plot .main-svg").first.wait_for(timeout=30_000)
        graphs = page.evaluate(GRAPHS)
        drawn = [g for g in graphs if any(len(x) for x in g["xs"])]
        assert drawn, f"no figure with data on the first Run All of {name}: {[g['title'] for g in graphs]}"
        for graph in drawn:
            _in_range(graph)
        empty = page.locator(f"{PANEL} .js-plotly-plot", has_not=page.locator(".main-svg .trace"))
        assert empty.count() == 0, "an empty figure is drawn as a blank box instead of one line"


XID_GRAPH = f"""([host]) => {{
  const g = [...document.querySelectorAll('{PANEL} .js-plotly-plot')].find(
      g => g._fullLayout && ((g._fullLayout.title || {{}}).text || '').startsWith('GPU kernel events'));
  const gpus = g ? g._fullData.filter(t => t.meta && t.meta.gpu).map(t => t.meta.gpu) : [];
  return gpus.length > 0 && gpus.every(k => k.startsWith(host + '|'));
}}"""


def test_notebook_01_opens_on_several_hosts_and_its_host_picker_narrows_the_figure(lab, page):
    """01's shipped default is the three-host example: its host picker offers every node whose kernel
    log has Xid lines, the first draw holds them all in range, and picking the culprit's node leaves
    that node's GPUs only, the Xid 48 GPU among them."""
    answer = json.loads((REPO / "examples" / "incident-multinode-ecc.answer.json").read_text())
    run_notebook(page, lab, set_parameters(lab, "01_kernel_xid.ipynb", save_as="hosts-01_kernel_xid.ipynb"),
                 "hosts-01")
    panel = page.locator(f"{PANEL} .jupyter-widgets.widget-vbox", has=page.locator(".js-plotly-plot")).first
    with screenshot_check(page, "hosts-01-3-first-draw"):
        page.locator(f"{PANEL} .js-plotly-plot .main-svg").first.wait_for(timeout=30_000)
        host = panel.locator(".widget-dropdown", has_text="host").locator("select").first
        hosts = [o for o in options(host) if o.startswith("hq-h100-")]
        assert len(hosts) >= 2 and answer["host"] in hosts, options(host)
        [graph] = [g for g in page.evaluate(GRAPHS) if g["title"].startswith("GPU kernel events")]
        drawn_hosts = {n.split()[0] for n in graph["names"]}
        assert len(drawn_hosts) >= 2 and len(graph["names"]) >= 8, graph["names"]
        _in_range(graph)
    with screenshot_check(page, "hosts-01-4-host-picked"):
        pick(host, answer["host"])
        page.wait_for_function(XID_GRAPH, arg=[answer["host"]], timeout=30_000, polling=250)
        [graph] = [g for g in page.evaluate(GRAPHS) if g["title"].startswith("GPU kernel events")]
        assert any(answer["gpu_pci"] in n for n in graph["names"]), graph["names"]
        _in_range(graph)


def test_one_name_per_gpu_no_overlapping_labels_culprit_highlighted_identifiers_whole(lab, page):
    """The renumbering example (0000:4f fell off, nvidia-smi called 0000:54 "GPU 2" afterwards)."""
    graphs = []
    renumbered = REPO / "examples" / "incident-gpu-fell-off-bus"  # 01 opens on the three-host example
    for name in ("01_kernel_xid.ipynb", "02_gpu_memory_oom.ipynb", "03_nccl_network.ipynb"):
        run_notebook(page, lab, set_parameters(lab, name, save_as=f"names-{name}", evidence=renumbered),
                     f"names-{name[:2]}")
        with screenshot_check(page, f"names-{name[:2]}-3-checked"):
            page.locator(f"{PANEL} .js-plotly-plot .main-svg").first.wait_for(timeout=30_000)
            shown = page.evaluate(GRAPHS)
            graphs += shown
            for graph in shown:
                assert _overlaps(graph["annotations"]) == [], (graph["title"], _overlaps(graph["annotations"]))
            assert page.evaluate(BROKEN_CELLS) == [], "identifiers broken over two lines"
            if name.startswith("03"):  # the rank table: rank 10 on 0000:4f is the culprit, one row
                [row] = page.evaluate(CULPRIT_ROWS)
                assert "0000:4f:00.0" in row["text"] and row["background"] not in ("rgba(0, 0, 0, 0)", "transparent")
                table = page.locator(f"{PANEL} table.gpulib-table", has_text="first_problem").first
                assert "0000:54:00.0 (GPU 2 at capture, 3 in the job)" in table.inner_text()
    names = _pci_names(graphs)
    assert {"0000:4f:00.0", "0000:54:00.0"} <= set(names), names
    assert all(len(v) == 1 for v in names.values()), names  # one name per physical GPU in every panel
    tags = [re.search(r"\(GPU \d+( in the job| at capture)?", n)[0] for v in names.values() for n in v]
    assert len(tags) == len(set(tags)), tags  # no two GPUs are both just "GPU 2"


def test_a_drill_hides_its_answer_until_the_commit_and_accepts_what_the_evidence_supports(lab, page):
    """The IB example as a trainee gets it from `gpulib drill`: nothing that holds the answer can be
    opened before the commit; "soft" (the output shows an error to fix, no critical part to drain)
    and "rank 2" (rank(s) 2, 3 never arrived) are right; the reveal releases the next steps and
    the score file."""
    folder = lab.root / "drill-ib"
    prepare(REPO / "examples" / "incident-ib-port-down", folder)
    listing = lab.api("contents/drill-ib")["content"]
    assert sorted(i["name"] for i in listing) == ["00_triage-drill.ipynb", "evidence"], listing
    with pytest.raises(urllib.error.HTTPError):  # the held-back next steps are not served
        lab.api("contents/drill-ib/.gpulib-drill-next-steps")
    served = json.dumps(lab.api("contents/drill-ib/evidence"))
    assert "answer" not in served and "README" not in served and "incident-" not in served

    run_notebook(page, lab, "drill-ib/00_triage-drill.ipynb", "drill-ib")
    drill = page.locator(".jupyter-widgets.widget-vbox", has=page.get_by_role("button", name="Commit my answer")).first
    with screenshot_check(page, "drill-ib-3-before"):
        drill.scroll_into_view_if_needed()
        assert page.evaluate(CULPRIT_ROWS) == [], "a highlighted row in a drill is the answer"
        assert not (folder / "findings-00.json").exists() and not (folder / "01_kernel_xid.ipynb").exists()
        selects = drill.locator(".widget-dropdown select").all()
        category, interruption = selects[0], selects[1]
        assert category_label("network_fabric") in options(category)  # in words
    with screenshot_check(page, "drill-ib-4-revealed"):
        pick(category, category_label("network_fabric"))
        pick(interruption, next(o for o in options(interruption) if o.startswith("soft")))
        for select in selects[2:]:
            labels = options(select)
            if "rank 2" in labels:
                pick(select, "rank 2")
            elif "pz-h100-03" in labels:
                pick(select, "pz-h100-03")
            else:
                pick(select, "no single GPU")
        drill.get_by_role("button", name="Commit my answer").click()
        result = drill.locator(".widget-output", has_text="Drill result").first
        result.wait_for(timeout=30_000)
        text = result.inner_text()
        assert re.search(r"Drill result: (\d) / \1 on the first attempt", text), text
        assert "never arrived" in text, text
    score = json.loads((folder / "drill-score.json").read_text())
    assert score["revealed"] and score["attempts"][0]["points"] == score["attempts"][0]["out_of"]
    assert (folder / "01_kernel_xid.ipynb").is_file() and (folder / "findings-00.json").is_file()
