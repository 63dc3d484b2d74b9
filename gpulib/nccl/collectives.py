"""The seven collectives, their buffers and their closed-form expected results (torch side).

Each rank fills its input from a pattern that depends on the rank and the element index, so a
result can be checked element by element against a formula instead of against another rank:
``v(rank, i) = rank + 1 + (i mod 4)``; a sum over n ranks is then ``n(n+1)/2 + n (i mod 4)``, a
min ``1 + i mod 4``, a max ``n + i mod 4``. For ``prod`` exactly one rank holds a 2 at each index
(everything else is 1), so the product is 2 everywhere and never overflows. A mismatching element
(a flipped bit on a link, a wrong chunk order) counts in ``#wrong`` like nccl-tests.

torch.distributed's ``all_reduce``, ``broadcast`` and ``reduce`` only exist as in-place calls:
their "out-of-place" column runs the same call on a separate buffer. ``alltoall`` and ``sendrecv``
have no defined in-place form in torch (with gloo, aliased input and output corrupt the data), so
their in-place columns are ``N/A`` and left out of the average, as nccl-tests does for a skipped
placement.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from gpulib.nccl.sizes import Counts, DType

REDUCING = ("all_reduce", "reduce_scatter", "reduce")
ROOTED = ("broadcast", "reduce")
_REDUCE_OPS = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
               "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}
_PERIOD = 4
_CHUNK = 1 << 24
#: torch only has in-place forms of these: input and output are one tensor.
IN_PLACE_API = ("all_reduce", "broadcast", "reduce")
# newer torch renamed the tensor forms (and deprecates the *_tensor names older torch only has).
all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
reduce_scatter_single = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


def has_in_place(collective: str) -> bool:
    return collective not in ("alltoall", "sendrecv")


def _pattern(src: torch.Tensor | int, index: torch.Tensor, nranks: int, op: str) -> torch.Tensor:
    """Input value of rank ``src`` at element ``index`` (int64, exact)."""
    if op == "prod":
        return torch.where((index + src) % nranks == 0, 2, 1)
    return src + 1 + index % _PERIOD


def _reduced(index: torch.Tensor, nranks: int, op: str) -> torch.Tensor:
    """Closed form of the reduction over all ranks of :func:`_pattern` (float64 for avg)."""
    k = index % _PERIOD
    if op == "sum":
        return nranks * (nranks + 1) // 2 + nranks * k
    if op == "min":
        return 1 + k
    if op == "max":
        return nranks + k
    if op == "avg":
        return (nranks + 1) / 2 + k.double()
    return torch.full_like(index, 2)  # prod


@dataclass
class Case:
    """Buffers and calls for one collective at one size on this rank.

    ``run(in_place)`` issues the collective once (the timed unit); ``check(in_place, corrupt)``
    refills the input, runs once and returns the number of mismatching elements on this rank.
    """

    collective: str
    counts: Counts
    dtype: DType
    op: str
    root: int
    rank: int
    nranks: int
    device: torch.device
    before_call: Callable[[], None] = lambda: None

    def __post_init__(self) -> None:
        torch_dtype = getattr(torch, self.dtype.torch_name)
        c = self.counts
        alloc = max(c.send_count, c.recv_count)
        recv = torch.zeros(c.recv_count, dtype=torch_dtype, device=self.device)
        send = recv if self.collective in IN_PLACE_API else torch.zeros(c.send_count, dtype=torch_dtype, device=self.device)
        self._buffers = {False: (send, recv)}
        if has_in_place(self.collective):
            whole = torch.zeros(alloc, dtype=torch_dtype, device=self.device)
            send_off, recv_off = 0, 0
            if self.collective == "all_gather":  # nccl-tests: sendbuff = recvbuff + rank*count
                send_off = self.rank * c.count
            elif self.collective == "reduce_scatter":  # recvbuff = sendbuff + rank*count
                recv_off = self.rank * c.count
            self._buffers[True] = (whole[send_off:send_off + c.send_count], whole[recv_off:recv_off + c.recv_count])
        self._op = _REDUCE_OPS[self.op]

    # -- the timed call --------------------------------------------------------------------------
    def run(self, in_place: bool) -> None:
        send, recv = self._buffers[in_place]
        self.before_call()
        name, n, r = self.collective, self.nranks, self.rank
        if name == "all_reduce":
            dist.all_reduce(recv, op=self._op)
        elif name == "broadcast":
            dist.broadcast(recv, src=self.root)
        elif name == "reduce":
            dist.reduce(recv, dst=self.root, op=self._op)
        elif name == "all_gather":
            all_gather_single(recv, send)
        elif name == "reduce_scatter":
            reduce_scatter_single(recv, send, op=self._op)
        elif name == "alltoall":
            dist.all_to_all_single(recv, send)
        elif name == "sendrecv":
            ops = [dist.P2POp(dist.isend, send, (r + 1) % n), dist.P2POp(dist.irecv, recv, (r - 1) % n)]
            for work in dist.batch_isend_irecv(ops):
                work.wait()
        else:
            raise ValueError(f"unknown collective {name}")

    # -- correctness ---------------------------------------------------------------------------
    def _input_value(self, idx: torch.Tensor) -> torch.Tensor | None:
        """This rank's input at element indices ``idx`` (None: this rank's input is not read)."""
        name, n, r = self.collective, self.nranks, self.rank
        if name == "broadcast":
            return _pattern(self.root, idx, n, self.op) if r == self.root else None
        if name == "alltoall":  # chunk j goes to rank j: value r + 1 + ((j + i) mod 4)
            base = max(self.counts.count, 1)
            return _pattern(r, idx // base + idx % base, n, self.op)
        return _pattern(r, idx, n, self.op)

    def _expected(self, idx: torch.Tensor) -> torch.Tensor | None:
        """The closed-form result at output indices ``idx`` (None: undefined on this rank)."""
        name, n, r, base = self.collective, self.nranks, self.rank, max(self.counts.count, 1)
        if name == "all_reduce" or (name == "reduce" and r == self.root):
            return _reduced(idx, n, self.op)
        if name == "reduce":
            return None  # only the root's result is defined
        if name == "broadcast":
            return _pattern(self.root, idx, n, self.op)
        if name == "reduce_scatter":
            return _reduced(idx + r * self.counts.count, n, self.op)
        if name == "all_gather":  # chunk s comes from rank s, element i of it
            return _pattern(idx // base, idx % base, n, self.op)
        if name == "alltoall":  # chunk s comes from rank s, which addressed it to us (j = r)
            return _pattern(idx // base, r + idx % base, n, self.op)
        return _pattern((r - 1) % n, idx, n, self.op)  # sendrecv: from the left neighbour

    def _chunks(self, length: int):
        """Index ranges of at most 16 M elements: the int64 formulas never need 8x the buffer."""
        for start in range(0, length, _CHUNK):
            stop = min(length, start + _CHUNK)
            yield start, stop, torch.arange(start, stop, dtype=torch.int64, device=self.device)

    def check(self, in_place: bool, corrupt: bool = False) -> int:
        """Run once on fresh input; count elements that differ from the closed form on this rank."""
        send, recv = self._buffers[in_place]
        recv.zero_()
        source = recv if self.collective in IN_PLACE_API else send
        for start, stop, idx in self._chunks(source.numel()):
            value = self._input_value(idx)
            if value is not None:
                source[start:stop].copy_(value)
        if corrupt and source.numel():
            source[0] += 1  # test injection: one wrong input element, as a faulty GPU would produce
        self.run(in_place)
        wrong = 0
        for start, stop, idx in self._chunks(recv.numel()):
            expected = self._expected(idx)
            if expected is None:
                return 0
            got = recv[start:stop]
            if self.dtype.is_float:
                tol = {"half": 1e-2, "bfloat16": 2e-2, "float": 1e-5, "double": 1e-12}[self.dtype.name]
                ok = torch.isclose(got.double(), expected.double(), rtol=tol, atol=0)
            else:  # integer arithmetic wraps the same way in int64 followed by a narrowing cast
                ok = got == expected.to(got.dtype)
            wrong += int((~ok).sum().item())
        return wrong


def sleep_before(seconds: float) -> Callable[[], None]:
    """A ``before_call`` hook that delays this rank (slow-rank test injection)."""
    return lambda: time.sleep(seconds)
