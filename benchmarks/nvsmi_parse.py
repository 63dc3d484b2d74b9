"""How much of the 1,024-node diagnosis budget the nvidia-smi parsers take.

Anchors, measured in the same run on the same text:
* ``-q -x``: ``xml.etree.ElementTree.fromstring`` alone (the XML tokenising every reader pays);
* ``-q`` text: ``splitlines`` + ``partition(':')`` on every line (the least any line reader does).

Prints the ratio parser/anchor and the projected time for 1,024 nodes (one 8-GPU ``-q`` and one
8-GPU ``-q -x`` per node). Usage: ``.venv/bin/python benchmarks/nvsmi_parse.py [REPEATS]``.
"""

from __future__ import annotations

import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from gpulib.parsers import nvsmi_query, nvsmi_xml

RECORDED = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "recorded" / "nvidia-smi"
Q_FILE = RECORDED / "gpud" / "nvidia-smi-query.535.161.08.out.0.valid"  # 8x H100
XML_FILE = RECORDED / "xml" / "datakit" / "gtx-8card.xml"  # 8x V100S


def _best(fn, text: str, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(text)
        best = min(best, time.perf_counter() - start)
    return best


def _tokenise(text: str) -> None:
    for line in text.splitlines():
        line.partition(":")


def main(repeats: int = 20) -> None:
    if not Q_FILE.exists() or not XML_FILE.exists():
        sys.exit(f"recorded corpus not found under {RECORDED}")
    q_text, xml_text = Q_FILE.read_text(), XML_FILE.read_text()
    q_anchor, q_parse = _best(_tokenise, q_text, repeats), _best(nvsmi_query.parse, q_text, repeats)
    x_anchor, x_parse = _best(ET.fromstring, xml_text, repeats), _best(nvsmi_xml.parse, xml_text, repeats)
    print(f"nvidia-smi -q   ({len(q_text) // 1024} KiB, 8 GPUs): {q_parse * 1e3:.2f} ms, "
          f"{q_parse / q_anchor:.1f}x splitlines+partition")
    print(f"nvidia-smi -q -x ({len(xml_text) // 1024} KiB, 8 GPUs): {x_parse * 1e3:.2f} ms, "
          f"{x_parse / x_anchor:.1f}x ElementTree.fromstring")
    print(f"projected 1,024 nodes (one -q and one -q -x each): {(q_parse + x_parse) * 1024:.2f} s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
