"""Fixtures for the collection tests: the recorded nvidia-smi XML captures behind the fake NVML."""

from __future__ import annotations

import pytest

from tests.fakes.fake_pynvml import FakeNvml

#: Named scenarios -> recorded real captures (../shared/corpus/recorded/nvidia-smi/xml/...).
CAPTURES = {
    "healthy_8gpu": "datakit/gtx-8card.xml",  # 8x V100S, SW power cap active on GPUs 3 and 6
    "mig_a100_80gb": "telegraf/a100-sxm4-v12.xml",  # MIG on: utilization and remapped rows N/A
    "mig_a100_40gb": "netdata/a100-sxm4-mig.xml",
    "ada_tlimit": "telegraf/rtx-4000-sff-ada-v13.xml",  # v13 schema, T.Limit margin 49 C
    "geforce_no_ecc": "netdata/rtx-3060.xml",
}


@pytest.fixture
def fake_nvml(recorded, monkeypatch):
    """``fake_nvml("healthy_8gpu", lost={3})`` installs a fake pynvml replaying that capture."""

    def install(scenario: str, **options) -> FakeNvml:
        return FakeNvml(recorded / "nvidia-smi" / "xml" / CAPTURES[scenario], **options).install(monkeypatch)

    return install
