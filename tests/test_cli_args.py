"""The shared bounded-number argument types: refused with the bound, never a traceback."""

from __future__ import annotations

import argparse

import pytest

from gpulib.cli_args import non_negative, positive


def test_bounds_and_messages():
    assert non_negative(int)("0") == 0 and positive(float)("0.5") == 0.5
    with pytest.raises(argparse.ArgumentTypeError, match=r"must be >= 0, got -1"):
        non_negative(int)("-1")
    with pytest.raises(argparse.ArgumentTypeError, match=r"must be > 0, got 0"):
        positive(float)("0")
    with pytest.raises(argparse.ArgumentTypeError, match="not a number: 'ten'"):
        non_negative(float)("ten")
