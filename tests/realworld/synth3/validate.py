"""Check the synth3 cases: expected.json parses with exactly the agreed keys, and every
non-null first_event is an exact line of one file under that case's input/."""
import json
import pathlib
import sys

KEYS = {"source_url", "category", "interruption", "host", "rank", "gpu_index", "gpu_pci",
        "first_event", "why", "confidence", "notes", "modelled", "rekeyed"}
VOCAB = {"gpu_fell_off_bus", "gpu_memory_error", "gpu_firmware_error", "nvlink_error",
         "thermal_throttling", "power_fault", "cuda_oom", "host_oom", "network_fabric",
         "driver_mismatch", "application_error", "data_pipeline_stall", "node_lost", "none"}
here = pathlib.Path(__file__).resolve().parent
bad = 0
cases = sorted(p for p in here.iterdir() if p.is_dir() and p.name[:1] == "s")
for case in cases:
    try:
        exp = json.loads((case / "expected.json").read_text())
    except Exception as e:  # noqa: BLE001
        print(f"FAIL {case.name}: expected.json: {e}"); bad += 1; continue
    if set(exp) != KEYS:
        print(f"FAIL {case.name}: keys differ: {sorted(set(exp) ^ KEYS)}"); bad += 1
    if exp.get("category") not in VOCAB or exp.get("interruption") not in {"hard", "soft", "none", "unknown"}:
        print(f"FAIL {case.name}: category/interruption outside vocabulary"); bad += 1
    fe = exp.get("first_event")
    if fe is None:
        if exp.get("category") != "none":
            print(f"FAIL {case.name}: first_event is null for a failure"); bad += 1
        else:
            print(f"ok   {case.name}: (negative control, no first_event)")
        continue
    hits = [f for f in (case / "input").rglob("*") if f.is_file()
            and fe in f.read_text(errors="replace").splitlines()]
    if not hits:
        print(f"FAIL {case.name}: first_event is not a line of any input file"); bad += 1
    else:
        print(f"ok   {case.name}: first_event in {hits[0].relative_to(case)}")
print(f"{len(cases)} cases, {bad} problems")
sys.exit(1 if bad else 0)
