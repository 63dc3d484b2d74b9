"""The diagnosis in five lines: what ``gpulib diagnose`` prints first and the report shows on top.

Why one function for both: at 03:00 the engineer reads the terminal or the archived report,
and the two must say the same thing. A report whose first block differs from the CLI's (another
culprit label, no resume command) makes people wonder which one is right. So the headline is
built here, from the ``gpulib.diagnosis/1`` dict (what the CLI, the runbook and the notebooks
all have), and both print :func:`headline_lines` verbatim.

What it holds, in the order an on-call engineer acts on it: hard or soft and the category; the
one-sentence summary; the culprit (host, GPU by PCI id with the index nvidia-smi showed at
capture, rank, time); the first action; the checkpoint to resume from and the command.
"""

from __future__ import annotations

from gpulib.findings import Finding

HEADS = {"hard": "HARD failure", "soft": "SOFT failure", "none": "NO interruption", "unknown": "UNKNOWN cause"}


def root_finding(diagnosis: dict) -> dict | None:
    """The root cause's full finding (its actions live there, not in ``root_cause``)."""
    root = diagnosis.get("root_cause") or {}
    wanted = root.get("finding")
    if not wanted:
        return None
    return next((f for f in diagnosis.get("findings") or [] if f.get("id") == wanted), None)


def hca_port(diagnosis: dict) -> str | None:
    """The InfiniBand port of a fabric root cause (``mlx5_2 port 1``): on the root's finding, else on
    a finding it caused on the same host (the kernel says "link down", ``ibstat`` names the port).
    The engineer reseats a cable of one port: "host pz-h100-03" alone sends them to eight."""
    root = root_finding(diagnosis)
    if not root:
        return None
    if root.get("hca_port"):
        return str(root["hca_port"])
    return next((str(f["hca_port"]) for f in diagnosis.get("findings") or []
                 if f.get("hca_port") and f.get("caused_by") == root.get("id") and f.get("host") == root.get("host")),
                None)


def culprit(diagnosis: dict) -> str | None:
    """``host gx-a800-102, 0000:4f:00.0 (GPU 2), rank 10, at 2026-...Z`` (known parts only; a
    fabric cause names its port: ``host pz-h100-03, mlx5_2 port 1, at ...``)."""
    root = diagnosis.get("root_cause") or {}
    if not root:
        return None
    f = Finding.from_dict({"id": root.get("finding") or "root", **root})
    if not (f.host or f.gpu_label() or f.rank is not None):
        return None  # a site-wide or job-wide cause: no single culprit to name
    port = hca_port(diagnosis)
    if port and f.host:
        return f.where().replace(f"host {f.host}", f"host {f.host}, {port}", 1)
    return f.where()


def first_action(diagnosis: dict) -> str | None:
    """The root cause's first action, else the first next step the diagnosis suggests."""
    root = root_finding(diagnosis)
    actions = (root or {}).get("actions") or []
    if actions:
        return str(actions[0])
    steps = diagnosis.get("next_steps") or []
    return str(steps[0]) if steps else None


def headline_lines(diagnosis: dict) -> list[str]:
    """The headline as text lines (the first block of ``gpulib diagnose``'s output)."""
    verdict = diagnosis.get("verdict") or {}
    interruption = verdict.get("interruption") or "unknown"
    lines = [f"{HEADS.get(interruption, HEADS['unknown'])} - {verdict.get('category') or 'none'}",
             f"  {verdict.get('summary') or ''}".rstrip()]
    who = culprit(diagnosis)
    if who:
        lines.append(f"  culprit: {who}")
    action = first_action(diagnosis)
    if action:
        lines.append(f"  first action: {action}")
    checkpoints = diagnosis.get("checkpoints") or {}
    if checkpoints.get("resume_from"):
        lines.append(f"  resume from: {checkpoints['resume_from']}")
        if checkpoints.get("resume_command"):
            lines.append(f"  resume command: {checkpoints['resume_command']}")
    elif checkpoints.get("rejected"):
        lines.append(f"  resume from: no valid checkpoint ({len(checkpoints['rejected'])} rejected)")
    else:
        lines.append("  resume from: no checkpoint in the evidence (gpulib ckpt latest DIR... to find one)")
    return lines


def headline_fields(diagnosis: dict) -> dict:
    """The same facts as a dict, for the report's template (``lines`` is :func:`headline_lines`)."""
    verdict = diagnosis.get("verdict") or {}
    checkpoints = diagnosis.get("checkpoints") or {}
    return {"interruption": verdict.get("interruption") or "unknown", "category": verdict.get("category") or "none",
            "summary": verdict.get("summary") or "", "culprit": culprit(diagnosis),
            "first_action": first_action(diagnosis), "resume_from": checkpoints.get("resume_from"),
            "resume_command": checkpoints.get("resume_command"), "lines": headline_lines(diagnosis)}
