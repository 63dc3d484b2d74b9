"""Did two archived runs read the same evidence? ``gpulib archive diff`` asks before it compares.

Why: a diff of two runs is a trend only when both looked at the same thing. Two nightly health
reports of one node read two captures (two folders) of the same hosts: that is the trend the
diff exists for. Two incident runs on two different jobs' evidence share nothing: "Xid 79 is
new" would only mean "this is another incident". So:

* same evidence paths: compare;
* different paths, the same hosts: compare, and say so (a note);
* different paths, some hosts in common, or hosts unknown on a side: compare with a loud warning;
* different runbooks, or different paths whose hosts share nothing: refuse unless ``--force``.

Hosts come from the runs' findings (``host`` fields and GPU inventories), so this works on any
archive, offline, like the diff itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpulib.runbooks.archive import ArchivedRun


def run_hosts(findings: list[dict]) -> set[str]:
    hosts: set[str] = set()
    for f in findings:
        if isinstance(f.get("host"), str) and f["host"]:
            hosts.add(f["host"])
        for gpu in f.get("gpus") or []:
            if isinstance(gpu, dict) and isinstance(gpu.get("host"), str) and gpu["host"]:
                hosts.add(gpu["host"])
    return hosts


@dataclass
class EvidenceCheck:
    a: list[str]
    b: list[str]
    hosts_a: list[str] = field(default_factory=list)
    hosts_b: list[str] = field(default_factory=list)
    level: str = "same"  # same | note | warning | refuse
    message: str | None = None

    def to_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "hosts_a": self.hosts_a, "hosts_b": self.hosts_b,
                "level": self.level, "message": self.message}


def _show(paths: list[str]) -> str:
    return ", ".join(paths) if paths else "no evidence path (a live capture)"


def _hosts(hosts: set[str]) -> str:
    shown = sorted(hosts)
    return ", ".join(shown[:6]) + (f" and {len(shown) - 6} more" if len(shown) > 6 else "") if shown else "unknown"


def compare_evidence(a: ArchivedRun, b: ArchivedRun) -> EvidenceCheck:
    ha, hb = run_hosts(a.findings), run_hosts(b.findings)
    check = EvidenceCheck(a.evidence, b.evidence, sorted(ha), sorted(hb))
    read = f"A read {_show(check.a)} (hosts {_hosts(ha)}); B read {_show(check.b)} (hosts {_hosts(hb)})"
    if a.runbook != b.runbook:
        check.level = "refuse"
        check.message = (f"the runs are of different runbooks ({a.runbook} vs {b.runbook}), which record different "
                         f"findings: the diff would list them as new or resolved; {read}")
    elif check.a == check.b:
        return check
    elif ha and ha == hb:
        check.level = "note"
        check.message = f"different captures of the same hosts ({_hosts(ha)}): {read}"
    elif ha and hb and not ha & hb:
        check.level = "refuse"
        check.message = f"the runs read different evidence of different hosts (two different incidents?): {read}"
    else:
        check.level = "warning"
        check.message = f"the runs read different evidence: {read}"
    return check
