"""Find the lines holding any of many keywords, at close to memchr speed.

Scanning a multi-GB log once per keyword is slow, and Python's regex alternation tries every
branch at every byte. Like the prefilters of grep and Hyperscan, this finder anchors each keyword
on its *rarest byte* in the log at hand (byte frequencies measured on a sample of it), walks the
occurrences of those few bytes with ``bytes.find`` of one byte (memchr in C) and only there checks
whether the whole keyword is present. A keyword made only of common bytes (a lowercase word in a
lowercase log) is searched whole instead, which is cheaper than stopping at every common byte.
"""

from __future__ import annotations

SAMPLE_BYTES = 256 * 1024
#: Above this share of the sample, stopping at every occurrence of the anchor byte in Python
#: costs more than one whole-keyword ``bytes.find`` pass.
ANCHOR_MAX_SHARE = 5e-4


class KeywordLines:
    """Start offsets of the lines of a chunk that contain at least one keyword."""

    def __init__(self, keywords: tuple[bytes, ...] | list[bytes]) -> None:
        self.keywords = tuple(k for k in keywords if k)
        self.by_anchor: dict[bytes, list[tuple[bytes, int]]] = {}
        self.direct: list[bytes] = []

    def plan(self, sample: bytes) -> None:
        """Choose how to find each keyword, from byte frequencies in ``sample`` (a slice of the log)."""
        sample = sample[:SAMPLE_BYTES] or b"\n"
        counts = {b: sample.count(bytes([b])) for b in {b for k in self.keywords for b in k}}
        self.by_anchor, self.direct = {}, []
        for kw in self.keywords:
            off = min(range(len(kw)), key=lambda i: (counts[kw[i]], -i))
            # an anchor byte already walked for another keyword is free: take it if nearly as rare
            shared = [i for i in range(len(kw)) if kw[i:i + 1] in self.by_anchor
                      and counts[kw[i]] <= 2 * counts[kw[off]] + 8]
            off = shared[0] if shared else off
            if counts[kw[off]] / len(sample) <= ANCHOR_MAX_SHARE:
                self.by_anchor.setdefault(kw[off:off + 1], []).append((kw, off))
            else:
                self.direct.append(kw)

    def line_starts(self, chunk: bytes | bytearray, limit: int | None = None) -> list[int]:
        """Lines of ``chunk[:limit]`` with a keyword. The plan is remade from the middle of every chunk,
        so a log whose head (NCCL init) differs from its body (progress lines) is anchored well in both."""
        limit = len(chunk) if limit is None else limit
        middle = max(0, limit // 2 - SAMPLE_BYTES // 2)
        self.plan(chunk[middle:min(middle + SAMPLE_BYTES, limit)])
        starts: set[int] = set()
        find, rfind, startswith = chunk.find, chunk.rfind, chunk.startswith
        for anchor, entries in self.by_anchor.items():
            pos = find(anchor, 0, limit)
            while pos != -1:
                for kw, off in entries:
                    if pos >= off and startswith(kw, pos - off, limit):
                        starts.add(rfind(b"\n", 0, pos - off) + 1)
                        pos = find(b"\n", pos, limit)  # the line is a candidate: skip the rest of it
                        break
                if pos == -1:
                    break
                pos = find(anchor, pos + 1, limit)
        for kw in self.direct:
            pos = find(kw, 0, limit)
            while pos != -1:
                starts.add(rfind(b"\n", 0, pos) + 1)
                end = find(b"\n", pos, limit)
                if end == -1:
                    break
                pos = find(kw, end, limit)
        return sorted(starts)
