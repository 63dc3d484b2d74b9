"""The join keys: every spelling of one PCI bus id normalises to the same string; times end in Z."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from gpulib.errors import BundleError, GpulibError
from gpulib.identity import normalize_pci, to_utc_iso


@pytest.mark.parametrize("spelling", [
    "PCI:0000:9b:00",      # kernel Xid line (no function)
    "00000000:9B:00.0",    # nvidia-smi
    "0000:9b:00.0",        # sysfs
    "9b000",               # NCCL busId
    " 0000:9B:00.0 ",      # pasted with blanks
])
def test_every_spelling_of_one_gpu_is_the_same_key(spelling):
    assert normalize_pci(spelling) == "0000:9b:00.0"


def test_domain_function_and_non_pci_values():
    assert normalize_pci("00000001:1a:00.1") == "0001:1a:00.1"
    assert normalize_pci("19b003") == "0001:9b:00.3"  # NCCL busId of domain 1, function 3
    for value in (None, "", "GPU-5f3c", "node-b", "9b:00.9"):
        assert normalize_pci(value) is None, value


def test_to_utc_iso_converts_offsets_and_takes_naive_as_utc():
    assert to_utc_iso(datetime(2026, 2, 10, 4, 12, 7, 900000, tzinfo=timezone(timedelta(hours=1)))) \
        == "2026-02-10T03:12:07Z"
    assert to_utc_iso(datetime(2026, 2, 10, 3, 12, 7)) == "2026-02-10T03:12:07Z"


def test_errors_name_the_file_and_the_next_step():
    err = BundleError("bundle already exists", path="/evidence/node-b", hint="pick a new --out")
    assert str(err) == "/evidence/node-b: bundle already exists (pick a new --out)"
    assert (err.message, err.path, err.hint) == ("bundle already exists", "/evidence/node-b", "pick a new --out")
    assert str(GpulibError("no GPU visible")) == "no GPU visible"
