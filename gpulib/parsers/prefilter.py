"""Find the lines holding any of many keywords, at memory speed.

Scanning a multi-GB log once per keyword is slow, and Python's regex alternation tries every
branch at every byte. Two engines answer the same question (which lines hold a keyword):

* **Hyperscan** (the ``hyperscan`` package, Intel's multi-literal matcher with SIMD literal
  finders, the engine grep-class tools use): one pass over the chunk for *all* keywords, several
  GB/s whatever the byte mix of the log, and the C loop never stops at a line without a keyword.
  The keywords become one database compiled once per process (~1 ms per keyword).
* **Rare-byte anchors** (pure Python, used where no Hyperscan wheel exists): like the prefilters of
  grep and Hyperscan, each keyword is anchored on its *rarest byte* in the log at hand (byte
  frequencies measured on a sample of it); the occurrences of those few bytes are walked with
  ``bytes.find`` of one byte (memchr in C) and only there is the whole keyword checked. A keyword
  made only of common bytes (a lowercase word in a lowercase log) is searched whole instead.
  Close to memchr speed on logs whose keywords hold a rare byte, one ``bytes.find`` pass per
  common-byte keyword otherwise (a progress-dense log: 4-5x slower than Hyperscan).

Both return exactly the lines a naive ``find`` of every keyword returns (tests/diagnose/test_prefilter.py).
"""

from __future__ import annotations

from functools import lru_cache

try:  # an optional engine: wheels for x86-64 and arm64 Linux/macOS, not every platform
    import hyperscan
except ImportError:  # pragma: no cover - exercised where the wheel is missing
    hyperscan = None

SAMPLE_BYTES = 256 * 1024
#: Above this share of the sample, stopping at every occurrence of the anchor byte in Python
#: costs more than one whole-keyword ``bytes.find`` pass.
ANCHOR_MAX_SHARE = 5e-4
ENGINES = ("hyperscan", "anchors") if hyperscan is not None else ("anchors",)


@lru_cache(maxsize=32)
def _database(keywords: tuple[bytes, ...]):
    """One Hyperscan block-mode database matching every keyword as a literal (each byte escaped)."""
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=[b"".join(b"\\x%02x" % c for c in kw) for kw in keywords],
               ids=list(range(len(keywords))), elements=len(keywords), flags=[0] * len(keywords))
    return db


class KeywordLines:
    """Start offsets of the lines of a chunk that contain at least one keyword.

    ``engine``: ``"hyperscan"`` (the default where installed) or ``"anchors"``."""

    def __init__(self, keywords: tuple[bytes, ...] | list[bytes], engine: str | None = None) -> None:
        self.keywords = tuple(dict.fromkeys(k for k in keywords if k))
        self.engine = engine or ENGINES[0]
        if self.engine not in ENGINES:
            raise ValueError(f"unknown or unavailable prefilter engine {self.engine!r} (have {', '.join(ENGINES)})")
        self.by_anchor: dict[bytes, list[tuple[bytes, int]]] = {}
        self.direct: list[bytes] = []

    def line_starts(self, chunk: bytes | bytearray, limit: int | None = None) -> list[int]:
        """Sorted start offsets of the lines of ``chunk[:limit]`` that hold a keyword."""
        limit = len(chunk) if limit is None else limit
        if not self.keywords or limit <= 0:
            return []
        if self.engine == "hyperscan":
            return sorted(self._hyperscan(chunk, limit))
        return self._anchors(chunk, limit)

    def line_keywords(self, chunk: bytes | bytearray, limit: int | None = None,
                      within: int | None = None) -> dict[int, tuple[int, ...]] | None:
        """Start offset -> indexes (in :attr:`keywords`) of every keyword each line holds in its first
        ``within`` bytes, for the lines :meth:`line_starts` returns (in its order): a line's
        keywords for free, from the same pass. None with the anchor engine, which stops at a
        line's first keyword (the caller then tests each keyword on the line itself)."""
        limit = len(chunk) if limit is None else limit
        if self.engine != "hyperscan":
            return None
        if not self.keywords or limit <= 0:
            return {}
        found = self._hyperscan(chunk, limit, within)
        return {start: found[start] for start in sorted(found)}

    # ---------------------------------------------------------------- Hyperscan
    def _hyperscan(self, chunk: bytes | bytearray, limit: int, within: int | None = None) -> dict[int, tuple[int, ...]]:
        """Line start -> keyword indexes; only the first keyword of a line unless ``within`` is given.
        A tuple per line, not a set: an 8 MiB chunk of a large job's console holds ~60,000 such lines,
        nearly all with one keyword (a set is four times the size of a 1-tuple)."""
        found: dict[int, tuple[int, ...]] = {}
        rfind, find, keywords = chunk.rfind, chunk.find, self.keywords
        line = [0, -1]  # [start, end) of the last line recorded: further keywords in it cost nothing

        def on_match(ident: int, _from: int, to: int, _flags: int, _context: object) -> None:
            pos = to - len(keywords[ident])  # where the keyword starts: its line is the one reported
            if line[0] <= pos < line[1]:
                if within is not None and to - line[0] <= within and ident not in found[line[0]]:
                    found[line[0]] = (*found[line[0]], ident)
                return None
            line[0] = rfind(b"\n", 0, pos) + 1
            end = find(b"\n", pos, limit)
            line[1] = limit if end == -1 else end + 1
            known = found.setdefault(line[0], ())
            if (within is None or to - line[0] <= within) and ident not in known:
                found[line[0]] = (*known, ident)
            return None  # a true value would stop the scan

        with memoryview(chunk) as view:
            _database(keywords).scan(view[:limit], match_event_handler=on_match)
        return found

    # ---------------------------------------------------------------- rare-byte anchors
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

    def _anchors(self, chunk: bytes | bytearray, limit: int) -> list[int]:
        """The plan is remade from the middle of every chunk, so a log whose head (NCCL init)
        differs from its body (progress lines) is anchored well in both."""
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
