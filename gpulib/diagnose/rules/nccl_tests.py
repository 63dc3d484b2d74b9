"""nccl-tests runs and NCCL's transport choice as job evidence: a run that stopped, mixed plugins.

Why: ``all_reduce_perf`` across two nodes is the test an engineer runs when a job hangs, and when
the test itself hangs it prints nothing after its header: no error, no table, no footer. A run
without its ``# Avg bus bandwidth`` footer did not end normally (hung, killed or crashed), so it
must never read as "no failure found".

The transport NCCL picks is printed per process (``Using network IB``, ``Using network
IBext_v8``, ``Using network Socket``). ``IBext_*`` comes from a network plugin (``libnccl-net.so``,
e.g. the HPC-X RDMA/SHARP plugin on LD_LIBRARY_PATH); plain ``IB`` is NCCL's own. When some nodes
load the plugin and others do not, the two ends speak different wire protocols and the first
inter-node connection never completes - usually a silent hang. That is the nodes' software setup,
not the fabric. (Socket on some nodes and IB on others is :func:`.job._transport`'s case.)
"""

from __future__ import annotations

from collections import defaultdict

from gpulib.diagnose.context import Context, quote
from gpulib.evidence import kinds
from gpulib.parsers.nccl_tests import NcclTestsRun

_USING = "Using network "


def run(ctx: Context) -> None:
    runs = [(f, r) for f, r in ctx.records(kinds.NCCL_TESTS) if isinstance(r, NcclTestsRun)]
    for f, r in runs:
        _stopped(ctx, f, r)
    _mixed_plugins(ctx, runs)


def _stopped(ctx: Context, file, r: NcclTestsRun) -> None:
    """A run with a header (devices or parameters) but no footer and no failure line of its own."""
    if r.complete or r.avg_busbw_gbps is not None or r.failures or not (r.devices or r.params):
        return
    last = r.rows[-1] if r.rows else None
    where = f"after the {last.size_bytes}-byte row" if last else "before its first size"
    how = (f"and was ended by {r.stopped}: it hung or was killed" if r.stopped else
           "with no '# Avg bus bandwidth' footer and no error line: it hung or was killed (or the paste was cut)")
    ctx.add("nccl-test-stopped", severity="error", category="network_fabric", role="symptom",
            title=f"nccl-tests {r.program or r.collective or 'run'} stopped {where}, {how}",
            quotes=[quote(file, last.line if last else r.line, "(last line of the run)" if last else
                               f"{r.program or 'nccl-tests'} header")],
            actions=["Rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET and compare what each node prints "
                     "(transport, plugin, NICs); run it on each pair of nodes to find the one that hangs"])


def _mixed_plugins(ctx: Context, runs) -> None:
    nets: dict[str, set[str]] = {h: {n for n in ns if n != "no-IB"} for h, ns in ctx.ids.transport.items()}
    lines: list[tuple] = [(f, e.line, e.text, e.host) for f, e in ctx.records(kinds.TRAINING_LOG)
                          if e.kind == "nccl_transport" and e.host]
    seen_files = set()
    for f, r in runs:
        if f.display in seen_files:
            continue  # the debug lines are shared by the runs of one file
        seen_files.add(f.display)
        for d in r.debug:
            if d.host and d.text.startswith(_USING):
                nets.setdefault(d.host, set()).add(d.text[len(_USING):].split()[0])
                lines.append((f, d.line, f"{d.host} NCCL {d.level} {d.text}", d.host))
    named = {h: frozenset(n) for h, n in nets.items() if n}
    if len(named) < 2 or any(n == {"Socket"} for n in named.values()) or len(set(named.values())) < 2:
        return
    groups: dict = defaultdict(list)
    for h, n in named.items():
        groups[n].append(h)
    odd = sorted(min(groups.values(), key=lambda hs: (len(hs), sorted(hs))))
    first = next((x for x in lines if x[3] in odd), None)
    sides = "; ".join(f"{'/'.join(sorted(n))} on {', '.join(sorted(hs))}"
                      for n, hs in sorted(groups.items(), key=lambda item: sorted(item[1])))
    minority = len(odd) < len(named) - len(odd)
    f = ctx.add("net-plugin", severity="critical", category="network_fabric", interruption="soft", role="cause",
                title=f"NCCL chose different network transports on the job's nodes ({sides}): they do not load the "
                      "same network plugin (libnccl-net.so) and cannot connect to each other",
                host=odd[0] if minority and len(odd) == 1 else None,
                quotes=[quote(first[0], first[1], first[2])] if first else [],
                actions=["Compare the 'NET/Plugin' / 'Plugin Path' lines of every node (NCCL_DEBUG=INFO): install the "
                         "same plugin everywhere, or set NCCL_NET_PLUGIN=none for the whole job",
                         "Check LD_LIBRARY_PATH on each node: an HPC-X/SHARP plugin directory on some nodes only is "
                         "the usual cause"])
    f.hardware = False
