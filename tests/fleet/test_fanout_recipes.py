"""The README's pdsh/clush fan-out recipe, as the nodes really run it: the same command line on
every node, the bundle named by ``%h`` from each node's own hostname (no ``--host``), all nodes
writing into one shared folder at once; then one config diff over the result.

Each "node" is a process in its own UTS namespace (``unshare --uts``) with its own hostname, which
is exactly what distinguishes pdsh/clush targets from one another for this command. Needs root
(or user namespaces); skipped where ``unshare`` is refused.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys

import pytest

from gpulib.diagnose.drift import config_drift
from gpulib.diagnose.node_facts import configs_from_paths
from gpulib.evidence.bundle import Bundle, verify

NODES = [f"node{i:02d}" for i in range(1, 5)]


def _unshare_works() -> bool:
    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "--uts", "sh", "-c", "hostname probe-node && hostname"], capture_output=True,
                           text=True, timeout=10)
    return probe.returncode == 0 and probe.stdout.strip() == "probe-node"


pytestmark = pytest.mark.skipif(not _unshare_works(), reason="unshare --uts not permitted here")


def _recipe(shared) -> str:
    """README: pdsh -w node[01-16] 'gpulib collect --out /shared/inc-42/%h' (collectors trimmed for speed)."""
    return f"{shlex.quote(sys.executable)} -m gpulib collect --out {shlex.quote(str(shared))}/%h --only versions"


def test_pdsh_style_fan_out_names_each_bundle_after_its_node(tmp_path):
    shared = tmp_path / "inc-42"
    shared.mkdir()
    procs = [subprocess.Popen(["unshare", "--uts", "sh", "-c", f"hostname {node} && {_recipe(shared)}"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for node in NODES]
    for proc in procs:
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert sorted(p.name for p in shared.iterdir()) == NODES, "one bundle per node, no .partial left"
    for node in NODES:
        assert Bundle.open(shared / node).host == node and verify(shared / node).ok
    configs = configs_from_paths([shared])
    assert sorted(configs) == NODES and all(c.kernel and c.os for c in configs.values())
    assert config_drift(configs) == []  # the same machine four times: nothing odd


@pytest.mark.skipif(not shutil.which("pdsh"), reason="pdsh not installed")
def test_real_pdsh_exec_module(tmp_path):
    """With pdsh installed: its ``exec`` module runs the recipe once per target, %h = target name."""
    shared = tmp_path / "inc-43"
    shared.mkdir()
    done = subprocess.run(["pdsh", "-R", "exec", "-w", ",".join(NODES), "unshare", "--uts", "sh", "-c",
                           f"hostname %h && {_recipe(shared)}"], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in shared.iterdir()) == NODES
