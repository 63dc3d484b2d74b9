"""One real Slurm for the whole session (starting it takes seconds; every test leaves the node
schedulable and the health check off)."""

from __future__ import annotations

import pytest

from tests.slurm.cluster import HEALTHCHECK_OFF, one_node_slurm


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    with one_node_slurm(tmp_path_factory.mktemp("slurm")) as cluster:
        yield cluster


@pytest.fixture
def cluster(slurm):
    """The session's Slurm, restored after the test: health check off, node resumed."""
    yield slurm
    slurm.set_healthcheck(HEALTHCHECK_OFF)
    slurm.resume_if_drained()
