"""One read shared by several readers of a file's lines (``gpulib.parsers.linescan``)."""

from __future__ import annotations

from gpulib.parsers import linescan, signatures
from gpulib.parsers import training_log as tl
from gpulib.parsers.prefilter import KeywordLines

LOG = ("[rank0]:2026-03-10 00:00:00,100 INFO trainer.py:412 step=1 loss=2.0 | fwd_bwd_ms=100.0\n" * 3000
       + "[rank1]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total "
         "capacity of 79.14 GiB of which 1.02 GiB is free.\n"
       + "[rank0]:2026-03-10 00:00:01,100 INFO trainer.py:412 step=2 loss=2.0 | fwd_bwd_ms=100.0\n" * 3000
       + "[rank0]: NVRM: Xid (PCI:0000:9b:00): 79, pid=123, GPU has fallen off the bus.\n")


def _key(records):
    return [(r.line, getattr(r, "kind", None) or r.signature, r.text) for r in records]


def test_shared_read_equals_separate_reads(tmp_path, monkeypatch):
    path = tmp_path / "console.log"
    path.write_text(LOG)
    monkeypatch.setattr(tl, "CHUNK_BYTES", 64 * 1024)  # many chunks: line numbers carried across them
    alone_job = tl.parse_file(path)
    sig = signatures.SignatureScanner(str(path))
    shared_job = tl.parse_file(path, also=[sig])
    alone_sig = signatures.scan_file(path)
    assert _key(shared_job.records) == _key(alone_job.records)
    assert _key(sig.result.records) == _key(alone_sig.records)
    assert [s.line for s in sig.result.records] == [3001, 3001, 6002, 6002]  # OOM; Xid 79 + fell off the bus
    assert [e.line for e in alone_job.records if e.kind == "cuda_oom"] == [3001]


class _Broken:
    def wanted(self, buf, limit, offset, size):
        return [0]

    def take(self, buf, limit, lines):
        raise RuntimeError("reader bug")

    def failed(self, exc):
        self.error = exc


def test_a_reader_that_raises_is_dropped_and_the_others_go_on(tmp_path):
    path = tmp_path / "console.log"
    path.write_text(LOG)
    broken, sig = _Broken(), signatures.SignatureScanner(str(path))
    linescan.read_file(path, [broken, sig], chunk_bytes=64 * 1024)
    assert str(broken.error) == "reader bug"
    assert len(sig.result.records) == 4


def test_number_lines():
    buf = b"a\nb\nc\nd\n"
    assert linescan.number_lines(buf, [0, 4, 6], 10) == [11, 13, 14]
    assert linescan.number_lines(buf, [], 10) == []


def test_signatures_from_the_prefilters_keywords_equal_a_test_of_every_keyword(incidents, monkeypatch, tmp_path):
    """Also for a keyword that is not ASCII, right after bytes that are not UTF-8."""
    broken = tmp_path / "train.log"
    broken.write_bytes(b"step 12 loss 1.93 \xe5\xb7\n" + "已杀死".encode() + b"\n\xf0\x9f\nKilled\n")
    logs = sorted(p for p in incidents.glob("case-*/input/**/*") if p.is_file() and p.suffix in (".out", ".log", ".txt"))
    assert logs
    logs.append(broken)
    with_prefilter = [signatures.scan_file(p).records for p in logs]
    assert [r.line for r in with_prefilter[-1]] == [2, 4]
    monkeypatch.setattr(KeywordLines, "line_keywords", lambda *_a, **_k: None)  # every keyword tested on every line
    signatures._MEMO.clear()
    assert [signatures.scan_file(p).records for p in logs] == with_prefilter
    assert any(with_prefilter)


def test_lines_up_to_counts_lines_as_the_parsers_do(tmp_path, monkeypatch):
    """The window ending at a line, whichever chunk its lines fall in; line ends removed."""
    log = tmp_path / "console.log"
    log.write_bytes(b"".join(b"line %d\r\n" % n for n in range(1, 51)) + b"\xff bad 51\nlast 52")
    monkeypatch.setattr(linescan, "CHUNK_BYTES", 7)  # every window crosses chunks
    assert linescan.lines_up_to(log, 10, 3) == (8, ["line 8", "line 9", "line 10"])
    assert linescan.lines_up_to(log, 2, 5) == (1, ["line 1", "line 2"])
    assert linescan.lines_up_to(log, 52, 2) == (51, ["\ufffd bad 51", "last 52"])
    assert linescan.lines_up_to(log, 60, 2) == (1, [])  # past the end: nothing to quote
    assert linescan.lines_up_to(tmp_path / "absent.log", 3, 2) == (1, [])
