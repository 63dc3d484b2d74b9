"""The diagnosis JSON is written as it is encoded (gpulib.diagnose.cli.write_json): the same
document as ``json.dumps``, whatever its lists' lengths."""

from __future__ import annotations

import io
import json

from gpulib.diagnose.cli import LONG_LIST, write_json


def test_the_written_document_reads_back_as_given():
    doc = {"schema": "gpulib.diagnosis/1", "verdict": {"interruption": "hard", "summary": "a \"quoted\"\nline"},
           "findings": [{"id": "xid79", "evidence": []}],
           "inputs": [{"path": f"node-{i:05d}/kernel/dmesg.txt", "kind": "kernel_log", "host": None}
                      for i in range(LONG_LIST + 5)],
           "timeline": [], "empty": {}}
    out = io.StringIO()
    write_json(doc, out)
    text = out.getvalue()
    assert json.loads(text) == doc and text.endswith("}\n")
    assert sum(1 for line in text.splitlines() if '"kind": "kernel_log"' in line) == LONG_LIST + 5  # an item a line
    assert json.loads(_written({})) == {}


def _written(doc: dict) -> str:
    out = io.StringIO()
    write_json(doc, out)
    return out.getvalue()
