"""Argument types the commands share: numbers with a lower bound, refused with a clear message.

argparse turns an ``ArgumentTypeError`` into ``gpulib X: error: argument --timeout: must be >= 0,
got -1`` and exit 2 (usage error), before any collector or capture starts.
"""

from __future__ import annotations

import argparse


def _bounded(kind, *, above_zero: bool):
    def convert(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value < 0 or (above_zero and value == 0):
            raise argparse.ArgumentTypeError(f"must be {'> 0' if above_zero else '>= 0'}, got {text}")
        return value
    return convert


def non_negative(kind):
    """``kind`` (int or float) of at least 0 (0 = off: no sampling, no timeout scaling...)."""
    return _bounded(kind, above_zero=False)


def positive(kind):
    """``kind`` (int or float) above 0 (a duration to measure, a count of readers)."""
    return _bounded(kind, above_zero=True)

