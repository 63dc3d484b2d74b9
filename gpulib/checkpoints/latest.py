"""``find_latest(roots)``: the newest complete checkpoint across one root per node.

Candidates are found per root (:mod:`layouts`), merged by (layout, series, name) across roots,
judged complete or not, and ordered by step (name or content, never mtime). The newest complete
one is then checked harder before it is recommended: its sidecar manifest's sha256 (when a
training script wrote ``<name>.json`` with one) and, with ``deep``, every zip CRC - newest first,
until one passes. Pointer files (``latest``, Megatron's tracker, ``last.ckpt``) are compared with
what was found, across nodes too, because a pointer that moved before the data was durable is
exactly how "resume from latest" loads a broken checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gpulib.checkpoints import resume
from gpulib.checkpoints.layouts import (
    EVALUATORS,
    MAX_SCAN_DEPTH,
    Candidate,
    discover,
    judge_other_files,
    natural_key,
    read_pointers,
    require_series_files,
)

HASH_CHUNK = 8 << 20


@dataclass
class LatestReport:
    roots: list[Path]
    candidates: list[Candidate] = field(default_factory=list)
    chosen: Candidate | None = None
    rejected: list[tuple[Path, str]] = field(default_factory=list)
    lacks: list[str] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)
    resume_command: str | None = None
    leftovers: list[str] = field(default_factory=list)
    pointers: dict[str, dict[str, str]] = field(default_factory=dict)  # series dir -> {pointer file: value}
    pointer_sources: list[tuple[Path, str, dict]] = field(default_factory=list, repr=False)  # (root, series, ptrs)
    disagreements: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: where the search went below the folders given (sub-folders, how deep, how many series)
    searched: list[str] = field(default_factory=list)
    #: what was checked on the candidate(s) judged hardest (--deep: how many CRC-32s)
    checked: list[str] = field(default_factory=list)

    @property
    def resume_from(self) -> Path | None:
        return self.chosen.path if self.chosen else None

    def to_dict(self) -> dict:
        return {
            "schema": "gpulib.ckpt-latest/1",
            "roots": [str(r) for r in self.roots],
            "resume_from": str(self.resume_from) if self.resume_from else None,
            "layout": self.chosen.layout if self.chosen else None,
            "step": self.chosen.step if self.chosen else None,
            "counter": self.chosen.counter if self.chosen else None,
            "rejected": [{"path": str(p), "reason": r} for p, r in self.rejected],
            "lacks": self.lacks, "advice": self.advice, "resume_command": self.resume_command,
            "leftovers": self.leftovers, "pointers": self.pointers, "disagreements": self.disagreements,
            "problems": self.problems, "notes": self.notes, "searched": self.searched, "checked": self.checked,
            "why_none": self.why_none(),
            "checkpoints": [
                {"layout": c.layout, "name": c.name, "series": c.series, "paths": [str(p) for p in c.paths],
                 "step": c.step, "counter": c.counter, "step_from_name": c.step_name, "step_from_content": c.step_content,
                 "complete": c.complete, "reasons": c.reasons, "warnings": c.warnings,
                 "contains": sorted(c.categories), "model_prefix": c.model_prefix, "world_size": c.world_size}
                for c in self.candidates
            ],
        }

    def why_none(self) -> str | None:
        """When nothing is recommended: why, in one line (UNSAFE ones named first)."""
        if self.chosen:
            return None
        if not self.candidates:
            return "no checkpoint found under " + ", ".join(str(r) for r in self.roots)
        untrusted = [c for c in self.candidates if c.untrusted]
        why = f"none of {len(self.candidates)} checkpoints is resumable"
        newest = self.candidates[-1]
        if newest.reasons and newest not in untrusted:
            why += f"; the newest, {newest.name}: {newest.reasons[0]}"
        if untrusted:
            why += (f"; {len(untrusted)} would run pickled code on resume (UNSAFE / needs review: "
                    f"{', '.join(c.name for c in untrusted[:4])}) and are never recommended")
        return why

    def to_text(self) -> str:
        lines = []
        for c in self.candidates:
            mark = "ok  " if c.complete else "BAD "
            lines.append(f"{mark} {c.layout:<11} {c.counter} {c.step if c.step is not None else '?':>8}  {c.path}")
            lines += [f"       - {r}" for r in c.reasons]
            lines += [f"       ! {w}" for w in c.warnings]
        lines += [f"leftover temp file: {x}" for x in self.leftovers]
        for where, ptrs in self.pointers.items():
            lines += [f"pointer {Path(where) / k} -> {v}" for k, v in ptrs.items()]
        lines += [f"DISAGREE: {d}" for d in self.disagreements]
        lines += [f"problem: {p}" for p in self.problems]
        lines += [f"note: {n}" for n in self.notes]
        lines += [f"searched: {x}" for x in self.searched]
        lines += [f"checked: {x}" for x in self.checked]
        if self.chosen:
            lines.append(f"\nresume from: {self.resume_from}  ({self.chosen.counter} {self.chosen.step}, {self.chosen.layout})")
            lines += [f"  lacks: {x}" for x in self.lacks]
            lines += [f"  note: {x}" for x in self.advice]
            lines.append(f"  command: {self.resume_command}")
        else:
            lines.append(f"\nno resumable checkpoint: {self.why_none()}")
        return "\n".join(lines)


def _deep_summary(c: Candidate, reports: list) -> str:
    """What ``--deep`` looked at in one candidate: CRC-32s checked, and what carries none."""
    checked = sum(r.meta.get("deep_checksummed_members", 0) for r in reports)
    total = sum(r.meta.get("deep_members", r.meta.get("deep_checksummed_members", 0)) for r in reports)
    bare = sorted({r.format for r in reports if not r.deep_checked})
    text = f"{c.name}: CRC-32 of {checked} of {total} zip members checked in {len(reports)} file(s)"
    if not reports:
        text = f"{c.name}: --deep found no file to check"
    if bare:
        text += f"; {sum(not r.deep_checked for r in reports)} file(s) carry no checksum ({', '.join(bare)})"
    return text + (" - passed" if not c.reasons else " - FAILED")


def _verify_hard(c: Candidate, deep: bool, checked: list[str] | None = None) -> None:
    """Checks too costly for every candidate: sidecar sha256, the seal's checksums, and (deep) CRC
    of every member. What was checked is appended to ``checked``."""
    if c.sidecar and isinstance(c.sidecar.get("sha256"), str):
        from gpulib.evidence.bundle import sha256_file  # here: hashing is rare, and `ckpt latest` starts lean

        try:
            got = sha256_file(c.path, HASH_CHUNK)
        except OSError as exc:
            c.reasons.append(f"cannot hash {c.path.name}: {exc.strerror or exc}")
            return
        if got != c.sidecar["sha256"].lower():
            c.reasons.append(f"sha256 of {c.path.name} is {got[:16]}..., its manifest says {c.sidecar['sha256'][:16]}... "
                             f"(changed after the save)")
        elif checked is not None:
            checked.append(f"{c.name}: sha256 matches the one its manifest recorded at save time")
    if not c.reasons:  # the seal (`gpulib ckpt seal`, `checkpoints.save`): every byte of the one to recommend
        from gpulib.checkpoints import seal

        for p in c.paths:
            try:
                sealed = seal.check(p, checksums=True)
            except OSError as exc:
                c.reasons.append(f"cannot check {p.name} against its seal: {exc.strerror or exc}")
                continue
            c.reasons += [f"differs from its seal {sealed.seal_name}: {x}" for x in sealed.problems]
            c.warnings += [f"its seal {sealed.seal_name}: {x}" for x in sealed.warnings if x not in c.warnings]
            if sealed.sealed and checked is not None:
                checked.append(f"{c.name}: {len(sealed.checked)} file(s) checked against its seal "
                               f"{sealed.seal_name} ({sealed.algorithm})" + (" - FAILED" if sealed.problems else " - passed"))
    if deep and not c.reasons:
        fresh = Candidate(c.layout, c.series, c.name, c.paths, step_name=c.step_name)
        EVALUATORS[c.layout](fresh, True)
        c.reasons += [r for r in fresh.reasons if r not in c.reasons]
        if checked is not None:
            checked.append(_deep_summary(c, fresh.reports))
    c.complete = not c.reasons


def _pointer_checks(report: LatestReport) -> list[str]:
    """Compare pointer files with the candidates and across roots; return the values pointed to."""
    targets: list[str] = []
    per_series: dict[str, dict[str, set]] = {}
    for root, series, ptrs in report.pointer_sources:
        for name, value in ptrs.items():
            targets.append(Path(value).name)
            per_series.setdefault(str(Path(series) / name), {}).setdefault(value, set()).add(str(root))
            named = [c for c in report.candidates if c.series == series and
                     (c.name == Path(value).name or (value.isdigit() and c.step_name == int(value)))]
            if named and not named[0].complete:
                report.disagreements.append(f"{name} in {root / series} names {value}, which is incomplete")
            elif not named and value != "release" and not value.startswith("<"):
                report.disagreements.append(f"{name} in {root / series} names {value}, which does not exist there")
    for ptr, values in per_series.items():
        if len(values) > 1:
            shown = "; ".join(f"{', '.join(sorted(r))}: {v}" for v, r in values.items())
            report.disagreements.append(f"nodes disagree on {ptr}: {shown}")
    return targets


def _search_notes(root: Path, found: list[Candidate]) -> list[str]:
    """Say when the search went below ``root``: how deep, how many candidates, how many series.

    Why: ``ckpt latest /shared`` on a broad folder finds other jobs' checkpoints too, and the
    newest by step across all of them would be recommended without a word."""
    depths = [len(Path(c.series).parts) for c in found if c.series]
    if not depths:
        return []
    depth = max(depths)
    series = sorted({c.series for c in found})
    text = (f"{root}: looked into its sub-folders (up to {MAX_SCAN_DEPTH} levels): {len(found)} candidate(s), "
            f"found up to {depth} level(s) down, in {len(series)} series: "
            + ", ".join(s or "." for s in series[:5]) + (f" and {len(series) - 5} more" if len(series) > 5 else ""))
    if len(series) > 1:
        text += ("; the newest step across ALL these series is chosen - if they are different jobs, "
                 "pass this job's checkpoint folder instead")
    return [text]


def _evaluate(c: Candidate) -> None:
    """Judge one candidate; whatever a hostile file in it makes a reader trip over is a reason on
    that candidate (never a crash: one bad file in checkpoint-200 must not hide checkpoint-100)."""
    try:
        EVALUATORS[c.layout](c, False)
        judge_other_files(c)
    except Exception as exc:  # noqa: BLE001 - the candidate is refused, by name, and the others are still judged
        c.reasons.append(f"gpulib could not read it: {type(exc).__name__}: {str(exc)[:200]}")


def find_latest(roots: list[str | Path], deep: bool = False) -> LatestReport:
    """Scan one directory per node; never raises on bad input (problems are reported)."""
    roots = [Path(r) for r in roots]
    report = LatestReport(roots)
    merged: dict[tuple, Candidate] = {}
    for root in roots:
        if not root.is_dir():
            report.problems.append(f"{root}: not a directory" if root.exists() else f"{root}: does not exist")
            continue
        found, leftovers, problems, notes = discover(root)
        report.searched += _search_notes(root, found)
        report.leftovers += [str(root / x) for x in leftovers]
        report.problems += problems
        report.notes += notes
        for c in found:
            key = (c.layout, c.series, c.name)
            if key in merged:
                merged[key].paths += c.paths
            else:
                merged[key] = c
        for series in sorted({c.series for c in found} | {""}):
            ptrs = read_pointers(root / series)
            if ptrs:
                report.pointers[str(root / series)] = ptrs
                report.pointer_sources.append((root, series, ptrs))
    for c in merged.values():
        _evaluate(c)
    require_series_files(list(merged.values()))
    for c in merged.values():
        c.complete = not c.reasons
        if c.step_name is not None and c.step_content is not None and c.step_name != c.step_content:
            c.warnings.append(f"the name says step {c.step_name}, the content says {c.step_content}")
    report.candidates = sorted(merged.values(),
                               key=lambda c: (c.step if c.step is not None else -1, c.step_name is not None,
                                              natural_key(c.name)))
    targets = _pointer_checks(report)
    for c in reversed(report.candidates):
        if c.complete:
            try:
                _verify_hard(c, deep, report.checked)
            except Exception as exc:  # noqa: BLE001 - see _evaluate
                c.reasons.append(f"gpulib could not check it: {type(exc).__name__}: {str(exc)[:200]}")
                c.complete = False
            if c.complete:
                report.chosen = c
                break
    if report.chosen and not deep:
        report.checked.append(f"{report.chosen.name}: structure, sizes and pickle safety of every file; "
                              "CRC-32 not checked (--deep reads every byte)")
    report.rejected = [(c.path, "; ".join(c.reasons)) for c in report.candidates if not c.complete]
    if report.chosen:
        c = report.chosen
        if c.step is None:
            report.advice.append("no step in its name or content: chosen by name order only - check it is the newest")
        report.lacks = resume.lacks(c, report.candidates)
        report.advice += resume.advice(c)
        if older := resume.older_with_more(c, report.candidates):
            report.advice.append(older)
        next_iteration = resume.accelerate_next_iteration(c, report.candidates)
        if next_iteration is not None:
            report.advice.append(f"set accelerator.project_configuration.iteration = {next_iteration} after load_state: "
                                 "load_state does not restore it, so the next save_state would start again at "
                                 "checkpoint_0 (\"Checkpoint directory ... already exists\", or the newest state saved "
                                 "under the oldest number)")
        report.resume_command = resume.command(c, c.path.parent, targets, next_iteration)
    return report
