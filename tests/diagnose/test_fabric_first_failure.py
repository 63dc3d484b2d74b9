"""Which network fault interrupted the job: the port every failing connection went through, found
near the interruption, on the job's own HCAs.

Hosts, addresses, PCI ids and times are invented; the lines keep the layouts of NCCL 2.19+
(``NET/IB : Got completion from peer ... localGid ::ffff:A remoteGids::ffff:B hca mlx5_N``), the
kernel's mlx5 messages and ``ibstat``.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose
from tests.diagnose.files import write_tree

NODES = {"rk-c17": 17, "rk-c18": 18, "rk-c19": 19}


def _warn(host: str, peer: str, hca: str = "mlx5_1") -> str:
    me, far = NODES[host], NODES[peer]
    return (f"{host}:{4100 + me}:{4180 + me} [1] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
            f"10.31.4.{far}<5{far}211> with status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.31.4.{me} "
            f"remoteGids::ffff:10.31.4.{far} hca {hca}")


def _job(pairs: list[tuple[str, str]], ib_hca: str = "mlx5_0,mlx5_1", start: str = "09:00:03") -> str:
    lines = [f"+ export NCCL_IB_HCA={ib_hca}",
             f"2026-10-08 {start},114 INFO step 10/50000 loss=4.113"]
    for n, host in enumerate(NODES):
        for dev in range(4):
            rank = 4 * n + dev
            lines.append(f"{host}:{4100 + NODES[host] + dev}:{4180 + NODES[host] + dev} [{dev}] NCCL INFO "
                         f"ncclCommInitRank comm 0x7f11c0{rank:02x}a0 rank {rank} nranks 12 cudaDev {dev} nvmlDev {dev} "
                         f"busId {(0x18 + 0x20 * dev):x}000 commId 0x9a1b2c3d4e5f6071 - Init COMPLETE")
    lines += [_warn(a, b) for a, b in pairs]
    lines.append("[rank5]:[E1008 12:14:41.306112004 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 5] "
                 "Process group watchdog thread terminated with exception: NCCL error: remote process exited or there "
                 "was a network error, NCCL version 2.21.5")
    lines.append("ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.")
    return "\n".join(lines) + "\n"


def test_the_one_end_of_every_failing_connection_is_the_suspect(tmp_path):
    # rk-c17 and rk-c18 blame rk-c19; rk-c19 blames each of them back: only rk-c19 is in every pair
    write_tree(tmp_path, {"job.out": _job([("rk-c17", "rk-c19"), ("rk-c18", "rk-c19"), ("rk-c19", "rk-c17"),
                                           ("rk-c19", "rk-c18")])})
    root = diagnose([tmp_path]).to_dict()["root_cause"]
    assert (root["category"], root["host"]) == ("network_fabric", "rk-c19")


def test_two_ends_that_blame_each_other_name_neither(tmp_path):
    # one connection reported from both of its ends: the errors cannot tell whose port failed
    write_tree(tmp_path, {"job.out": _job([("rk-c17", "rk-c18"), ("rk-c18", "rk-c17")])})
    out = diagnose([tmp_path]).to_dict()
    assert out["root_cause"]["category"] == "network_fabric"
    assert not any("one end of all" in str(f.get("identified_by")) for f in out["findings"])


# ---- the first failure is the one near the interruption, on a port the job uses ----
OLD_PORT = ("Oct  3 07:12:10 rk-c17 kernel: [   17.509700] mlx5_core 0000:e1:00.0 ens31np0: Link down")
FRESH_CABLE = ("Oct  8 12:14:10 rk-c19 kernel: [431977.204411] mlx5_core 0000:c1:00.0: mlx5_port_module_event:1110:(pid 0): "
               "Port module event: module 1, Cable unplugged\n"
               "Oct  8 12:14:10 rk-c19 kernel: [431977.218102] mlx5_core 0000:c1:00.0 ens25np0: Link down")
BOOT = "Oct  3 07:11:53 {} kernel: [    2.276800] Linux version 6.8.0-45-generic (buildd@lcy02-amd64-075)"


def _using(host: str, hcas: list[str]) -> str:
    listed = " ".join(f"[{n}]{h}:1/IB" for n, h in enumerate(hcas))
    return (f"{host}:{4100 + NODES[host]}:{4190 + NODES[host]} [0] NCCL INFO NET/IB : Using {listed} [RO]; "
            f"OOB eth0:10.9.0.{NODES[host]}<0>")


def _ibstat(ca: str, state: str, physical: str, link: str = "InfiniBand") -> str:
    return (f"CA '{ca}'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tFirmware version: 28.41.1000\n\tPort 1:\n"
            f"\t\tState: {state}\n\t\tPhysical state: {physical}\n\t\tRate: 400\n\t\tBase lid: 0\n\t\tLink layer: {link}\n")


def _incident(tmp_path, kern: dict[str, str], using: dict[str, list[str]] | None = None,
              ibstat: dict[str, str] | None = None) -> dict:
    job = _job([])
    if using:
        job = "\n".join(_using(h, hcas) for h, hcas in using.items()) + "\n" + job
    files = {"job.out": job} | {f"{h}/kern.log": BOOT.format(h) + "\n" + text + "\n" for h, text in kern.items()}
    files |= {f"{h}/ibstat.txt": text for h, text in (ibstat or {}).items()}
    write_tree(tmp_path, files)
    return diagnose([tmp_path]).to_dict()


def test_a_port_down_since_days_before_the_job_gives_way_to_the_link_lost_at_the_failure(tmp_path):
    out = _incident(tmp_path, {"rk-c17": OLD_PORT, "rk-c19": FRESH_CABLE})
    assert (out["root_cause"]["category"], out["root_cause"]["host"]) == ("network_fabric", "rk-c19")
    old = next(f for f in out["findings"] if f["host"] == "rk-c17" and f["category"] == "network_fabric")
    assert old["caused_by"] is None  # also seen, not the cascade of this failure


def test_an_old_port_with_nothing_nearer_is_still_named_with_its_age(tmp_path):
    out = _incident(tmp_path, {"rk-c17": OLD_PORT, "rk-c19": ""})
    root = out["root_cause"]
    assert (root["category"], root["host"]) == ("network_fabric", "rk-c17")
    assert "5 day(s) before the job started" in out["verdict"]["summary"]


def test_an_old_port_the_job_felt_at_start_up_stays_on_its_path(tmp_path):
    # rk-c17's NCCL opened one HCA of the two the others opened: its missing rail was part of this job
    rails = {"rk-c17": ["mlx5_0"], "rk-c18": ["mlx5_0", "mlx5_1"], "rk-c19": ["mlx5_0", "mlx5_1"]}
    out = _incident(tmp_path, {"rk-c17": OLD_PORT, "rk-c19": FRESH_CABLE}, using=rails)
    assert out["root_cause"]["host"] == "rk-c17"


def test_a_port_on_an_hca_the_job_does_not_use_is_not_its_cause(tmp_path):
    # NCCL_IB_HCA=mlx5_0,mlx5_1: mlx5_4 carries no job traffic, however it is down
    out = _incident(tmp_path, {"rk-c17": "", "rk-c19": ""}, ibstat={"rk-c17": _ibstat("mlx5_4", "Down", "Disabled")})
    root = out["root_cause"]
    assert root is None or root["host"] != "rk-c17"
    port = next(f for f in out["findings"] if "mlx5_4" in f["title"])
    assert port["severity"] == "warning" and "not an HCA the job's NCCL uses" in port["title"]


def test_a_down_port_the_job_uses_is_its_cause_roce_included(tmp_path):
    for link in ("InfiniBand", "Ethernet"):  # RoCE: ibstat's link layer is Ethernet
        out = _incident(tmp_path / link, {"rk-c17": "", "rk-c19": ""},
                        ibstat={"rk-c17": _ibstat("mlx5_1", "Down", "Polling", link)})
        root = out["root_cause"]
        assert (root["category"], root["host"]) == ("network_fabric", "rk-c17"), link


def test_nccl_ib_hca_is_read_as_nccl_reads_it():
    from gpulib.diagnose.hca_path import HcaPath
    assert HcaPath(spec="mlx5_1:1").selects("mlx5_10")  # a prefix, without "="
    assert not HcaPath(spec="=mlx5_1:1").selects("mlx5_10")
    assert not HcaPath(spec="^mlx5_4").selects("mlx5_4") and HcaPath(spec="^mlx5_4").selects("mlx5_0")
    assert HcaPath(spec="$HCAS").selects("mlx5_0") is None  # an unexpanded variable says nothing
