"""One list of file kinds (gpulib.evidence.kinds) that agrees with the parser registry."""

from gpulib.evidence import kinds
from gpulib.parsers.registry import BY_KIND


def test_every_parser_kind_is_named_once():
    assert sorted(kinds.PARSED) == sorted(BY_KIND) and len(set(kinds.PARSED)) == len(kinds.PARSED)


def test_groups_hold_only_known_kinds_and_series_are_not_snapshots():
    for group in (kinds.SMI_SNAPSHOTS, kinds.GPU_SNAPSHOTS, kinds.GPU_SERIES, kinds.GPU_STATE, kinds.KERNEL, kinds.JOB):
        assert set(group) <= set(kinds.PARSED)
    assert not set(kinds.GPU_SNAPSHOTS) & set(kinds.GPU_SERIES)
    assert set(kinds.GPU_STATE) == {*kinds.GPU_SNAPSHOTS, *kinds.GPU_SERIES, kinds.DCGM_EXPORTER}
