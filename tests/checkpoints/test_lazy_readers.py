"""``ckpt inspect`` imports only the reader of the layout it meets (start-up is most of its time)."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import sys
from gpulib.checkpoints.files import inspect_path
report = inspect_path(sys.argv[1])
loaded = {name.rsplit('.', 1)[-1] for name in sys.modules if name.startswith('gpulib.checkpoints.')}
print(report.format, sorted(loaded & {'dcp', 'torch_save', 'safetensors', 'layouts', 'latest', 'resume'}),
      'torch' in sys.modules)
"""


def _loaded(path) -> str:
    return subprocess.run([sys.executable, "-c", CODE, str(path)], capture_output=True, text=True, check=True).stdout.strip()


def test_a_torch_file_loads_the_torch_reader_only(full_ckpt):
    assert _loaded(full_ckpt) == "torch_zip ['torch_save'] False"


def test_a_dcp_directory_loads_the_dcp_reader(dcp_ckpt):
    fmt, rest = _loaded(dcp_ckpt).split(" ", 1)
    assert "'dcp'" in rest and "'safetensors'" not in rest and rest.endswith("False")
