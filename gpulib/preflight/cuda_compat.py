"""Will the job's CUDA runtime run on each node's driver? Named before a relaunch.

The driver's "CUDA Version" (nvidia-smi header, NVML ``cuda_driver_version``) is the newest
CUDA runtime it fully serves. Against the runtime the job was built with (PyTorch's
``torch.version.cuda``, or ``nvcc -V`` for extensions compiled on the node):

* runtime major newer than the driver's (CUDA 12.x on a CUDA 11.x driver): **no-go**, the
  first CUDA call fails with "CUDA driver version is insufficient for CUDA runtime version";
* same major, newer minor (12.4 on a 12.2 driver): runs through *minor version compatibility*
  (CUDA 11.1+), but PTX JIT and features of the newer minor fail: a warning;
* otherwise fine.

The minimum drivers are NVIDIA's CUDA Toolkit release notes table (Linux x86_64, "Toolkit
Driver Version", and the minor-version-compatibility floor of each major).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from gpulib.findings import Finding
from gpulib.preflight.findings import env_finding

#: CUDA major.minor -> minimum Linux driver for full support (CUDA Toolkit release notes, table 3).
MIN_DRIVER = {
    (11, 0): "450.36.06", (11, 1): "455.23", (11, 2): "460.27.03", (11, 3): "465.19.01", (11, 4): "470.42.01",
    (11, 5): "495.29.05", (11, 6): "510.39.01", (11, 7): "515.43.04", (11, 8): "520.61.05", (12, 0): "525.60.13",
    (12, 1): "530.30.02", (12, 2): "535.54.03", (12, 3): "545.23.06", (12, 4): "550.54.14", (12, 5): "555.42.02",
    (12, 6): "560.28.03", (12, 8): "570.26", (12, 9): "575.51.03", (13, 0): "580.65.06",
}


def _version(text: object) -> tuple[int, int] | None:
    m = re.match(r"\s*(\d+)\.(\d+)", str(text or ""))
    return (int(m[1]), int(m[2])) if m else None


def check(host: str | None, runtime: str, driver_cuda: str, driver_version: str | None = None,
          what: str = "PyTorch is built for CUDA") -> Finding | None:
    """The finding for one runtime on one node, or None when it runs (or a version is unreadable)."""
    built, served = _version(runtime), _version(driver_cuda)
    if built is None or served is None or built <= served:
        return None
    need = MIN_DRIVER.get(built)
    driver = f"driver {driver_version}" if driver_version else "the driver"
    fix = f"upgrade the NVIDIA driver to >= {need} (CUDA {runtime}), or use a build for CUDA <= {driver_cuda}" \
        if need else f"use a build for CUDA <= {driver_cuda}, or upgrade the driver"
    hosts = [host] if host else []
    where = host or "this node"
    if built[0] > served[0]:
        return env_finding("cuda-runtime-too-new", "error", None,
                           f"{what} {runtime} but {driver} on {where} serves CUDA {driver_cuda}: the first CUDA call "
                           "fails with 'CUDA driver version is insufficient for CUDA runtime version'.", fix, hosts)
    return env_finding("cuda-minor-version-compat", "warning", None,
                       f"{what} {runtime}, {driver} on {where} serves CUDA {driver_cuda}: it runs through minor version "
                       "compatibility, but PTX JIT (kernels not prebuilt for this GPU) and newer-minor features fail.",
                       fix, hosts)


def findings(rows: Iterable[Mapping]) -> list[Finding]:
    """Findings over per-host version rows with keys ``host``, ``cuda_driver``, ``driver``,
    ``torch_cuda`` and ``nvcc`` (the shape of ``EvidenceTables.software_versions()``)."""
    out = []
    for row in rows:
        for key, what in (("torch_cuda", "PyTorch is built for CUDA"), ("nvcc", "the CUDA toolkit (nvcc) is")):
            found = check(row.get("host"), row.get(key), row.get("cuda_driver"), row.get("driver"), what) \
                if row.get(key) and row.get("cuda_driver") else None
            if found:
                out.append(found)
    return out
