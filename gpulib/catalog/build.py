"""Build ``xid.tsv`` from the reference sources, keeping who-said-what per row.

Run ``python -m gpulib.catalog.build`` to regenerate the data file, or ``--check`` to prove the
committed file still agrees with the references (exit status 1 and a diff summary if not).

Why a build step: no single Xid table can be trusted (DCGM's labels for 56/57/58/61 disagree with
NVIDIA's catalog, gpud still calls 136 "Reserved", GCM treats 109 as non-critical while EKS
replaces the instance). The data file therefore keeps NVIDIA's catalog as the base, derives the
hard/soft verdict and the category from NVIDIA's resolution buckets and mnemonics by rules, applies
the few hand decisions of ``xid_overrides.tsv`` (each with its reason), and writes every other
source's opinion into ``sources`` and every disagreement into ``conflicts``.

Inputs (``--reference DIR``, default ``gpulib/catalog/reference/``, shipped in the package so the
build reads nothing outside it): ``xid/nvidia_xid_catalog_via_gpud.tsv``, ``xid/xid_crossref.csv``
and the Xid table in section 3 of ``health-checks-and-xid.md``.
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import sys
from pathlib import Path

from gpulib import exit_codes

HERE = Path(__file__).resolve().parent
DATA_FILE = HERE / "xid.tsv"
OVERRIDES_FILE = HERE / "xid_overrides.tsv"

COLUMNS = (
    "code", "name", "description", "interruption", "category", "category_basis", "action",
    "nvidia_immediate", "nvidia_investigatory", "cause", "sources", "conflicts",
)

CAT = "CAT (NVIDIA Xid catalog via gpud catalog_generated.go @4a8de33)"

#: NVIDIA immediate resolution bucket -> interruption. hard = a GPU or the node needs service.
BUCKET_INTERRUPTION = {
    "RESTART_APP": "soft", "CHECK_UVM": "soft",
    "IGNORE": "info", "XID_154": "info", "WORKFLOW_XID_45": "info",
    "RESET_GPU": "hard", "RESTART_BM": "hard", "RESTART_VM": "hard", "WORKFLOW_XID_48": "hard",
    "WORKFLOW_NVLINK_ERR": "hard", "WORKFLOW_NVLINK5_ERR": "hard", "CHECK_MECHANICALS": "hard",
    "CONTACT_SUPPORT": "hard", "UPDATE_SWFW": "hard",
}

#: What the operator does, per NVIDIA bucket (meanings as summarised in the reference, section 3).
BUCKET_ACTION = {
    "RESTART_APP": "Restart the job. If the same GPU repeats it under different applications, drain it and run dcgmi diag -r 3.",
    "CHECK_UVM": "Check the nvidia-uvm module and restart the job; contact support if it repeats.",
    "IGNORE": "No action by itself (informational); follow any Xid logged with it.",
    "XID_154": "Do what the new recovery action says: 0 none, 1 reset the GPU, 2 reboot the node, 3 drain P2P, 4 drain and "
               "reset.",
    "WORKFLOW_XID_45": "Follow the Xid that caused it; if it appears alone, restart nvidia-fabricmanager.",
    "RESET_GPU": "Stop the GPU's processes and reset it (nvidia-smi -r -i <gpu>); if it persists reboot the node; if it "
                 "persists after reboot, replace the GPU.",
    "RESTART_BM": "Power-cycle the node (the GPU is gone from PCIe; a GPU reset cannot reach it); if it recurs, inspect "
                  "riser/cabling/PSU and RMA.",
    "RESTART_VM": "Restart the VM/instance.",
    "WORKFLOW_XID_48": "Reset the GPU (the row remap activates on reset), then check remapped rows / SRAM DBE threshold in "
                       "nvidia-smi -q; RMA if it recurs or remapping failed.",
    "WORKFLOW_NVLINK_ERR": "Reset the GPU or reboot the node, then check nvidia-smi nvlink -s / -e; replace if it recurs.",
    "WORKFLOW_NVLINK5_ERR": "Decode unit and severity on the line: Nonfatal needs no action; Fatal needs a GPU reset (watch "
                            "for Xid 154).",
    "CHECK_MECHANICALS": "Reseat the GPU's auxiliary power cables.",
    "CONTACT_SUPPORT": "Drain the GPU, collect nvidia-bug-report.sh and contact NVIDIA/the vendor.",
    "UPDATE_SWFW": "Update the driver and firmware to matching versions.",
}
DEFAULT_ACTION = "No NVIDIA resolution published: drain the GPU, collect nvidia-bug-report.sh and contact NVIDIA/the vendor."

#: Category from the NVIDIA mnemonic, first match wins (docs/ARCHITECTURE.md vocabulary).
CATEGORY_RULES = (
    (("FALLEN_OFF_THE_BUS", "PCIE_FATAL"), "gpu_fell_off_bus"),
    (("NVLINK", "C2C", "ALI_TRAINING"), "nvlink_error"),
    (("ECC", "DRAM", "SRAM", "RESOURCE_RETIREMENT", "CONTAINED_ERROR", "SBE", "MEMORY_CAPACITY",
      "FB_MEMORY", "FB_LINK"), "gpu_memory_error"),
    (("GSP", "PMU", "SEC2", "FECS_ERR", "SEC_FAULT", "INIT_ERROR", "FATAL_TIMEOUT", "INFOROM",
      "CTXSW", "SPI_"), "gpu_firmware_error"),
    (("TEMP",), "thermal_throttling"),
    (("PWR", "PSHC"), "power_fault"),
    (("ROBUST_CHANNEL", "PBDMA"), "application_error"),
)
DEFAULT_CATEGORY = "gpu_firmware_error"

# The cross-reference's source columns, with the words used in ``sources``.
SOURCE_LABELS = {
    "gcm": "OLD/GCM (older NVIDIA cause matrix in gcm xid_error_codes.py @1b7bde9)",
    "gpud": "GPUD (gpud xid.go @4a8de33)",
    "dcgm": "DCGM (DcgmHealthWatch.cpp @72fa3fe)",
    "eks": "EKS (eks-node-monitoring-agent @51af549)",
    "az": "AZ (azurehpc-health-checks azure_gpu_xid.nhc @0e0a1ac)",
    "imb": "IMB (imbue cluster-health @8f5964a)",
    "k8s": "K8S (k8s-device-plugin applicationErrorXids)",
    "hc": "HC3 (reference health-checks-and-xid.md section 3)",
}
_DISPUTE_WORDS = re.compile(r"conflict|disagree|stricter|stale|disputed|treats as|not in AZ|omits", re.I)


#: The reference sources the build reads, shipped beside the data file (package data).
REFERENCE_DIR = HERE / "reference"


def _clean(text: str) -> str:
    return " ".join((text or "").replace("**", "").replace("`", "").split())


def read_catalog(path: Path) -> dict[int, dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as handle:
        return {int(row["code"]): row for row in csv.DictReader(handle, delimiter="\t")}


def read_crossref(path: Path) -> dict[int, dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as handle:
        lines = [line for line in handle if not line.startswith("#")]
    return {int(row["xid"]): row for row in csv.DictReader(io.StringIO("".join(lines)))}


def read_reference_table(path: Path) -> dict[int, dict[str, str]]:
    """The Xid table of section 3: | Xid | Meaning | Typical cause | Recommended action | Where / disagreements |"""
    rows: dict[int, dict[str, str]] = {}
    in_section = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            in_section = line.startswith("## 3.")
            continue
        if not in_section or not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 5 and cells[0].isdigit():
            rows[int(cells[0])] = {"meaning": _clean(cells[1]), "cause": _clean(cells[2]),
                                   "action": _clean(cells[3]), "where": _clean(cells[4])}
    return rows


def read_overrides(path: Path = OVERRIDES_FILE) -> dict[int, dict[str, tuple[str, str]]]:
    with open(path, encoding="utf-8", newline="") as handle:
        lines = [line for line in handle if not line.startswith("#")]
    out: dict[int, dict[str, tuple[str, str]]] = {}
    for row in csv.DictReader(io.StringIO("".join(lines)), delimiter="\t"):
        out.setdefault(int(row["code"]), {})[row["field"]] = (row["value"], row["reason"])
    return out


def _category(mnemonic: str) -> tuple[str, str]:
    for keywords, category in CATEGORY_RULES:
        for word in keywords:
            if word in mnemonic:
                return category, f"mnemonic contains {word}"
    return DEFAULT_CATEGORY, "default: driver-reported GPU fault of no more specific kind"


def _opinions(x: dict[str, str]) -> list[tuple[str, str, bool | None]]:
    """(source label, what it says, says-hard?) for one cross-reference row."""
    out: list[tuple[str, str, bool | None]] = []
    if x.get("gcm_causes"):
        noncrit = x.get("gcm_non_critical") == "True"
        out.append((SOURCE_LABELS["gcm"], f"causes {x['gcm_causes']}; "
                    + ("non-critical (WARN)" if noncrit else "critical"), not noncrit))
    if x.get("gpud_event_type"):
        what = f"{x['gpud_event_type']}: {x.get('gpud_description', '')}"
        if x.get("gpud_repair_actions"):
            what += f" -> {x['gpud_repair_actions']}"
        out.append((SOURCE_LABELS["gpud"], what, x["gpud_event_type"] == "Fatal"))
    if x.get("dcgm_health_result"):
        out.append((SOURCE_LABELS["dcgm"], x["dcgm_health_result"], x["dcgm_health_result"].startswith("FAIL")))
    if x.get("eks_node_condition") == "True":
        out.append((SOURCE_LABELS["eks"], "node condition (auto-repair)", True))
    if x.get("azure_nhc_fails") == "True":
        out.append((SOURCE_LABELS["az"], "fails the node (check_gpu_xid)", True))
    if x.get("imbue_hw_range") == "True":
        out.append((SOURCE_LABELS["imb"], "hardware Xid", True))
    if x.get("k8s_device_plugin_app_error") == "True":
        out.append((SOURCE_LABELS["k8s"], "application error: device stays healthy", False))
    return out


def build_rows(reference: Path) -> list[dict[str, str]]:
    catalog = read_catalog(reference / "xid" / "nvidia_xid_catalog_via_gpud.tsv")
    crossref = read_crossref(reference / "xid" / "xid_crossref.csv")
    table = read_reference_table(reference / "health-checks-and-xid.md")
    overrides = read_overrides()
    rows = []
    for code in sorted(set(catalog) | set(crossref)):
        cat = catalog.get(code, {})
        x = crossref.get(code, {})
        hc = table.get(code)
        name = cat.get("mnemonic") or x.get("nvidia_mnemonic", "")
        immediate = cat.get("immediate_resolution") or x.get("nvidia_immediate_bucket", "")
        investigatory = cat.get("investigatory_resolution") or x.get("nvidia_investigatory_bucket", "")
        description = cat.get("description") or x.get("nvidia_catalog_description", "")
        conflicts: list[str] = []
        older = _clean(x.get("gpud_description", ""))
        if description == "Unused" and older and older != "Unused":
            description = f"Unused on A100 and newer (NVIDIA catalog); older meaning: {older}"
            conflicts.append(f"label: NVIDIA catalog says Unused, gpud says '{older}'")
        interruption = BUCKET_INTERRUPTION.get(immediate.split(" ")[0], "")
        category, basis = _category(name)
        for field, (value, reason) in overrides.get(code, {}).items():
            if field == "interruption":
                interruption = value
            elif field == "category":
                category, basis = value, f"override: {reason}"
        if not interruption:
            interruption = "hard"
        action = BUCKET_ACTION.get(immediate.split(" ")[0], DEFAULT_ACTION)
        if hc and "caused by previous Xid" in hc["meaning"] + hc["where"]:
            action += " Newer drivers name the root Xid on the line ('caused by previous Xid N')."
        sources = [f"{CAT}: {name}, '{cat.get('description', '')}', {immediate or '-'} -> {investigatory or '-'}"]
        says_hard: list[str] = []
        says_soft: list[str] = []
        for label, what, hard in _opinions(x):
            sources.append(f"{label}: {what}")
            (says_hard if hard else says_soft).append(label.split(" ")[0])
        if hc:
            sources.append(f"{SOURCE_LABELS['hc']}: action {hc['action']}; {hc['where']}")
            if _DISPUTE_WORDS.search(hc["where"]):
                conflicts.append(f"reference notes: {hc['where']}")
        if interruption == "hard" and says_soft:
            conflicts.append(f"severity: ours hard (NVIDIA {immediate}), not critical per {', '.join(says_soft)}")
        elif interruption != "hard" and says_hard:
            conflicts.append(f"severity: ours {interruption} (NVIDIA {immediate}), hard per {', '.join(says_hard)}")
        cause = "; ".join(filter(None, [hc["cause"] if hc else "", x.get("gcm_causes", "")]))
        rows.append({
            "code": str(code), "name": name, "description": _clean(description),
            "interruption": interruption, "category": category, "category_basis": basis,
            "action": action, "nvidia_immediate": immediate, "nvidia_investigatory": investigatory,
            "cause": cause, "sources": " | ".join(_clean(s) for s in sources),
            "conflicts": " | ".join(_clean(c) for c in conflicts),
        })
    return rows


def render(rows: list[dict[str, str]]) -> str:
    out = io.StringIO()
    out.write("# gpulib Xid catalog. Generated by `python -m gpulib.catalog.build`; edit xid_overrides.tsv or the\n")
    out.write("# rules in build.py, not this file. Columns: sources = who said what, conflicts = where they disagree.\n")
    writer = csv.DictWriter(out, fieldnames=COLUMNS, delimiter="\t", lineterminator="\n",
                            quoting=csv.QUOTE_MINIMAL)
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, default=REFERENCE_DIR)
    parser.add_argument("--check", action="store_true", help="compare with the committed xid.tsv, write nothing")
    args = parser.parse_args(argv)
    if not (args.reference / "xid").is_dir():
        print(f"reference sources not found under {args.reference} (pass --reference DIR)", file=sys.stderr)
        return exit_codes.USAGE
    text = render(build_rows(args.reference))
    if args.check:
        current = DATA_FILE.read_text(encoding="utf-8") if DATA_FILE.exists() else ""
        if current == text:
            print(f"{DATA_FILE.name} agrees with {args.reference}")
            return exit_codes.OK
        old = {line.split("\t", 1)[0]: line for line in current.splitlines()}
        changed = [line.split("\t", 1)[0] for line in text.splitlines() if old.get(line.split("\t", 1)[0]) != line]
        print(f"{DATA_FILE.name} is out of date for codes: {', '.join(changed[:20])}; "
              "run python -m gpulib.catalog.build", file=sys.stderr)
        return exit_codes.SOFT
    DATA_FILE.write_text(text, encoding="utf-8")
    print(f"wrote {DATA_FILE} ({text.count(chr(10)) - 3} codes)")
    return exit_codes.OK


if __name__ == "__main__":
    sys.exit(main())
