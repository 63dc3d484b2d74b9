"""``journalctl --list-boots`` beside the previous boot's last lines, read by the diagnosis.

Each fixture is a pasted shell session as an engineer hands it over after the node came back.
Hosts, boot ids, processes and times are ours.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose

BOOTS = """\
[ops@gx-17 ~]$ journalctl --list-boots --no-pager | tail -n 3
IDX BOOT ID                          FIRST ENTRY                 LAST ENTRY
 -1 5d2a0e7c1b9f4a36b8c4e1f0a7d3c925 Mon 2026-02-09 17:41:55 CET Thu 2026-02-12 03:17:48 CET
  0 e91c4b07a3d24f58b6a0c7e2d1f9b483 Thu 2026-02-12 03:21:30 CET Thu 2026-02-12 09:02:11 CET
"""

# the previous boot's journal ends in routine lines: it stopped mid-run
CUT = """\
[ops@gx-17 ~]$ journalctl -b -1 -n 4 --no-pager
Feb 12 03:15:01 gx-17 CRON[88123]: (root) CMD (command -v debian-sa1 > /dev/null && debian-sa1 1 1)
Feb 12 03:16:40 gx-17 kubelet[1702]: I0212 03:16:40.118230    1702 kubelet_getters.go:187] "Pod status updated"
Feb 12 03:17:22 gx-17 containerd[1311]: time="2026-02-12T03:17:22.402+01:00" level=info msg="shim disconnected"
Feb 12 03:17:48 gx-17 kubelet[1702]: I0212 03:17:48.550921    1702 prober.go:107] "Probe succeeded"
"""

# the same boot ended by an orderly reboot
CLEAN = """\
[ops@gx-17 ~]$ journalctl -b -1 -n 4 --no-pager
Feb 12 03:17:46 gx-17 systemd-logind[1020]: System is rebooting.
Feb 12 03:17:47 gx-17 systemd[1]: Reached target reboot.target - System Reboot.
Feb 12 03:17:47 gx-17 systemd[1]: Shutting down.
Feb 12 03:17:48 gx-17 systemd-journald[402]: Journal stopped
"""

PSU = """\
[ops@gx-17 ~]$ sudo dmidecode -t 39 | grep -E 'Location|Max Power|Status'
\tLocation: PSU1
\tMax Power Capacity: 1600 W
\tStatus: Present, OK
[ops@gx-17 ~]$ nvidia-smi --query-gpu=index,name,power.limit --format=csv
index, name, power.limit [W]
0, NVIDIA RTX 6000 Ada Generation, 300.00 W
1, NVIDIA RTX 6000 Ada Generation, 300.00 W
2, NVIDIA RTX 6000 Ada Generation, 300.00 W
3, NVIDIA RTX 6000 Ada Generation, 300.00 W
"""


def _verdict(tmp_path, text):
    (tmp_path / "postmortem.txt").write_text(text)
    d = diagnose([tmp_path])
    return d.category, d.interruption, d.root_cause.host if d.root_cause else None


def test_journal_cut_with_no_shutdown_is_a_lost_node(tmp_path):
    assert _verdict(tmp_path, BOOTS + CUT) == ("node_lost", "hard", "gx-17")


def test_with_an_undersized_supply_it_is_a_power_fault(tmp_path):
    assert _verdict(tmp_path, BOOTS + CUT + PSU) == ("power_fault", "hard", "gx-17")


def test_orderly_reboot_is_not_a_loss(tmp_path):
    category, _interruption, _host = _verdict(tmp_path, BOOTS + CLEAN)
    assert category == "none"


def test_list_of_boots_alone_cannot_tell(tmp_path):
    assert _verdict(tmp_path, BOOTS)[0] == "none"


def test_a_filtered_tail_cannot_show_the_shutdown(tmp_path):
    """``-u kubelet`` keeps the unit's lines only: a clean reboot's lines would be missing too."""
    filtered = CUT.replace("journalctl -b -1 -n 4", "journalctl -b -1 -u kubelet -n 4")
    assert _verdict(tmp_path, BOOTS + filtered)[0] == "none"
