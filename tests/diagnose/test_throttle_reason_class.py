"""Hard or soft of a throttled GPU follows the class of its clock-event reason.

NVML's ``HwPowerBrakeSlowdown`` (``0x80``, shown by nvidia-smi under ``HW Slowdown``) is asserted by
a signal from outside the GPU: the power supply, a loose PCIe power cable, the board's power
sensing. The machine needs a hand on it, so the interruption is hard. Heat (SW/HW thermal) stays
a soft straggler, and a SW power cap alone is no fault at all.

Fixtures: an 8-rank job on two hosts of our own (``pb-a``, ``pb-b``) whose survivors time out in
an all-reduce, and an ``nvidia-smi --query-gpu`` snapshot of ``pb-b`` taken during the hang, in
the layout nvidia-smi prints.
"""

from __future__ import annotations

import pytest

from gpulib.diagnose import diagnose
from tests.diagnose.test_rules import BUS, job_log, timeouts

HEADER = ("index, pci.bus_id, utilization.gpu [%], power.draw [W], clocks.current.sm [MHz], "
          "clocks.max.sm [MHz], clocks_throttle_reasons.active")
HEALTHY = "{i}, 00000000:{bus}:00.0, 99 %, 287.40 W, 1755 MHz, 1755 MHz, 0x0000000000000000"
BUSES = [b[:2] for b in BUS]  # the buses the ranks' NCCL init lines name


def snapshot(mask: int, clock: int = 345, watts: float = 52.8, slow: int = 1) -> str:
    rows = [HEALTHY.format(i=i, bus=bus) for i, bus in enumerate(BUSES)]
    rows[slow] = (f"{slow}, 00000000:{BUSES[slow]}:00.0, 99 %, {watts:.2f} W, {clock} MHz, 1755 MHz, "
                  f"0x{mask:016x}")
    return "ops@pb-b:~$ nvidia-smi --query-gpu=index,pci.bus_id,utilization.gpu,power.draw,clocks.sm," \
           "clocks.max.sm,clocks_throttle_reasons.active --format=csv\n" + HEADER + "\n" + "\n".join(rows) + "\n"


def incident(tmp_path, smi: str):
    (tmp_path / "job.log").write_text(job_log("pb-a", 0, 8, 5100) + job_log("pb-b", 4, 8, 5200)
                                      + timeouts([0, 1, 2, 3, 4, 6, 7]))
    (tmp_path / "pb-b-nvidia-smi.txt").write_text(smi)
    return diagnose([tmp_path], tz="UTC")


def throttles(d):
    return [f for f in d.findings if f.id.startswith("throttle")]


@pytest.mark.parametrize("mask", [0x88, 0x80])
def test_power_brake_is_a_hard_power_fault_of_that_gpu(tmp_path, mask):
    d = incident(tmp_path, snapshot(mask))
    assert (d.interruption, d.category) == ("hard", "power_fault")
    assert d.root_cause.host == "pb-b" and d.root_cause.gpu_pci == "0000:3b:00.0"
    assert any("power cable" in a for a in d.root_cause.actions)


def test_hw_thermal_slowdown_stays_a_soft_straggler(tmp_path):
    """HW slowdown with HW thermal active and power brake not active: the GPU protects itself from heat."""
    d = incident(tmp_path, snapshot(0x48, clock=810, watts=190.0))
    (found,) = throttles(d)
    assert (found.category, found.interruption) == ("thermal_throttling", "soft")
    assert d.interruption != "hard"


def test_sw_power_cap_alone_is_no_fault(tmp_path):
    d = incident(tmp_path, snapshot(0x04, clock=1410, watts=300.0))
    assert not [f for f in throttles(d) if f.role == "cause"]
    assert d.category != "power_fault" and d.interruption != "hard"
