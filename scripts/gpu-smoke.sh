#!/usr/bin/env bash
# gpu-smoke.sh: the check to run ONCE on a real GPU machine (the CI machines have no GPU).
#
#   1. capture an evidence bundle with 5 s of 1 Hz NVML sampling,
#   2. print its summary (collector statuses, every GPU's name/temperature/clocks/power),
#      and fail unless NVML, sampling and nvidia-smi worked for every GPU,
#   3. if torch with CUDA is importable: run gpulib's NCCL tester on all local GPUs
#      (torchrun, NCCL backend, 1M..256M, factor 2) and fail on its FAIL verdict.
#
# Works from a fresh copy of the repository: it creates .venv (seeing the system's packages, so a
# GPU image's torch and nvidia-ml-py are used) and installs gpulib into it; offline it falls back
# to installing without dependencies. Exit code: 0 = all checks passed, 1 = a check failed.
# Environment: OUT=<dir> keeps the bundle there (default: a new temporary folder), PYTHON=python3.x.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if ! .venv/bin/python -c "import gpulib.collect" 2>/dev/null; then
  echo "== setting up .venv"
  "$PYTHON" -m venv --system-site-packages .venv
  .venv/bin/pip install --quiet -e . \
    || .venv/bin/pip install --quiet --no-deps --no-build-isolation -e . \
    || { echo "gpu-smoke: cannot install gpulib into .venv" >&2; exit 1; }
fi
PY=.venv/bin/python

OUT=${OUT:-$(mktemp -d)/smoke-bundle}
echo "== gpulib collect --out $OUT --sample-seconds 5"
"$PY" -m gpulib collect --out "$OUT" --sample-seconds 5 >/dev/null
status=0
"$PY" -m gpulib.collect.smoke "$OUT" || status=1

if "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  gpus=$(nvidia-smi -L | wc -l)
  echo "== NCCL tester on $gpus local GPU(s)"
  "$PY" -m torch.distributed.run --standalone --nproc-per-node "$gpus" -m gpulib.nccl \
      --backend nccl -b 1M -e 256M -f 2 --json "$OUT.nccl.json" || status=1
else
  echo "== NCCL tester skipped: torch with CUDA is not importable by $PY"
fi

echo "== bundle: $OUT"
[ "$status" -eq 0 ] && echo "gpu-smoke: PASS" || echo "gpu-smoke: FAIL"
exit "$status"
