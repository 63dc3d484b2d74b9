"""Out-of-band history from the BMC: the System Event Log, its clock, chassis power, all sensors.

``ipmitool sdr`` (in :mod:`commands`) is the present state; a PSU that dropped for a second at
03:12 reads ``ok`` again at 03:40. These collectors keep what the BMC *remembers*:

* ``sel elist last N``: the newest N SEL entries ("Power Supply AC lost", "Redundancy Lost",
  "Power off/down"). A full SEL can take minutes to read over a slow KCS interface, hence N;
* ``sel time get``: the BMC's clock now, so SEL times can be put on the UTC timeline;
* ``chassis status``: the latched "Last Power Event" (``ac-failed``) and power-fault flags;
* ``sensor``: every sensor with its thresholds (fans, inlet/exhaust, PSU input power).

Each runs on its own timeout; without a BMC (no ``/dev/ipmi0``) each is ``unavailable``.
"""

from __future__ import annotations

from gpulib.collect.commands import NO_BMC, command
from gpulib.collect.core import Collector

#: Default number of newest SEL entries to keep: days of history on a busy BMC, seconds to read.
SEL_ENTRIES = 500


def bmc_collectors(sel_entries: int = SEL_ENTRIES) -> list[Collector]:
    return [
        command("ipmitool-sel", ["ipmitool", "sel", "elist", "last", str(sel_entries)], "ipmi/sel-elist.txt", 90,
                absent=NO_BMC),
        command("ipmitool-sel-time", ["ipmitool", "sel", "time", "get"], "ipmi/sel-time.txt", 20, absent=NO_BMC),
        command("ipmitool-chassis", ["ipmitool", "chassis", "status"], "ipmi/chassis-status.txt", 20, absent=NO_BMC),
        command("ipmitool-sensor", ["ipmitool", "sensor"], "ipmi/sensor.txt", 90, absent=NO_BMC),
    ]
