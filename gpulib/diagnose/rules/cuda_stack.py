"""Which node's driver is too old for the job's CUDA, and by how much.

A CUDA error of the table's driver class (``cudaErrorInsufficientDriver``, "the provided PTX was
compiled with an unsupported toolchain", ...) says *that* a driver is older than the CUDA the job
was built with, not *which* node has it: a launcher prints it from a container's host name, and a
job that spans nodes fails on the one node whose driver lags. Two facts in the evidence answer it:

* the driver's side: the ``nvidia-smi`` banner of each node, ``Driver Version: 450.80.02  CUDA
  Version: 11.0`` (the highest CUDA runtime that driver can run);
* the runtime's side: what the job was built with: a wheel's ``1.10.1+cu113``, torch's ``CUDA used
  to build PyTorch: 11.3``, an image's ``CUDA_VERSION=11.8`` or ``nvidia/cuda:11.8.0-...``.

A node whose driver's CUDA is below the runtime's is the culprit (the finding names it and says the
two versions); with no runtime version in the evidence the finding still says what the node's
driver supports. The catalogue's identity rows ``nvsmi-driver-cuda`` and ``cuda-runtime-build``
read the two facts from any file, with the host of the pasted session's prompt.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpulib.diagnose.context import Context, quote
from gpulib.findings import Finding
from gpulib.parsers.signatures import printers_of

#: The findings a driver-class CUDA error makes: the job rule's and the catalogue's.
DRIVER_FINDINGS = ("driver-old", "sig-driver-too-old")
DRIVER_BANNER = "nvsmi-driver-cuda"
RUNTIME_BUILD = "cuda-runtime-build"


@dataclass(frozen=True)
class Stated:
    """A version a line states: ``cuda`` as (major, minor), the driver's own version when it is a
    driver's banner, and where it was read."""

    host: str | None
    cuda: tuple[int, int]
    driver: str | None
    file: object
    line: int
    text: str

    @property
    def shown(self) -> str:
        return f"{self.cuda[0]}.{self.cuda[1]}"


def _version(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


def _build_tag(cu: str) -> tuple[int, int]:
    """``113`` -> (11, 3), ``92`` -> (9, 2): a ``+cuXYZ`` tag's last digit is the minor version."""
    return int(cu[:-1]), int(cu[-1])


def _stated(ctx: Context) -> tuple[dict[str | None, Stated], list[Stated]]:
    """The drivers' CUDA per host (the last banner of a host wins: the newest capture) and every
    runtime build version stated."""
    drivers: dict[str | None, Stated] = {}
    builds: list[Stated] = []
    for file in ctx.inputs.files:
        for s in file.signals:
            if s.signature == DRIVER_BANNER:  # one line may stand for the same banner of several hosts
                for host in {h for _r, _p, h in printers_of(s)} or {file.host}:
                    host = host or file.host
                    drivers[host] = Stated(host, _version(s.fields["cuda"]), s.fields["driver"], file, s.line, s.text)
            elif s.signature == RUNTIME_BUILD:
                host = s.host or file.host
                cu = s.fields.get("cu")
                text = next((s.fields[k] for k in ("cuda", "cuda2", "cuda3", "cuda4") if s.fields.get(k)), None)
                if cu or text:
                    builds.append(Stated(host, _build_tag(cu) if cu else _version(text), None, file, s.line, s.text))
    return drivers, builds


def run(ctx: Context) -> None:
    # a user-space / kernel-module mismatch (cudaErrorSystemDriverMismatch) is no matter of versions
    found = [f for f in ctx.findings if f.category == "driver_mismatch" and f.id.startswith(DRIVER_FINDINGS)
             and f.extra.get("cuda_class") in (None, "driver_too_old")]
    if not found:
        return
    drivers, builds = _stated(ctx)
    if not drivers:
        return
    runtime = max(builds, key=lambda b: b.cuda) if builds else None
    for f in found:
        _cross_check(f, drivers, runtime)


def _cross_check(f: Finding, drivers: dict[str | None, Stated], runtime: Stated | None) -> None:
    """Name the node whose driver is older than the runtime, and say the two versions."""
    if runtime is not None:
        old = [d for d in drivers.values() if d.cuda < runtime.cuda]
        if not old:
            f.title += (f"; every nvidia-smi shown supports CUDA {runtime.shown} or newer (the job's runtime): "
                        "the failing node's driver is not in the evidence")
            return
        culprit = _culprit(f, old)
        why = (f"driver {culprit.driver} on {culprit.host} supports CUDA up to {culprit.shown}, the job was built "
               f"for CUDA {runtime.shown}")
        newer = sorted(d.host for d in drivers.values() if d.cuda >= runtime.cuda and d.host)
        if newer:
            why += f" ({', '.join(newer)} with a newer driver can run it)"
        f.quotes += [quote(culprit.file, culprit.line, culprit.text), quote(runtime.file, runtime.line, runtime.text)]
    else:
        culprit = drivers.get(f.host) or (next(iter(drivers.values())) if len(drivers) == 1 else None)
        if culprit is None:
            return
        why = f"driver {culprit.driver} on {culprit.host} supports CUDA up to {culprit.shown}"
        f.quotes.append(quote(culprit.file, culprit.line, culprit.text))
    if culprit.host and (f.host is None or f.host not in drivers):
        f.host = culprit.host  # the error's printer was a container or unnamed: the node is the banner's
    f.title += f": {why}"
    f.extra["driver_cuda"] = culprit.shown
    if runtime is not None:
        f.extra["runtime_cuda"] = runtime.shown


def _culprit(f: Finding, old: list[Stated]) -> Stated:
    """Of the nodes whose driver is too old, the one the error was printed on, else the oldest."""
    return next((d for d in old if d.host == f.host), min(old, key=lambda d: d.cuda))


__all__ = ["run"]
