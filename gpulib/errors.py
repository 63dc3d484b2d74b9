"""Exceptions with structured fields and text that tells the operator what to do next."""

from __future__ import annotations

from gpulib import exit_codes


class GpulibError(Exception):
    """Base class. ``path`` names the file involved (if any), ``hint`` says what to do about it.
    ``exit_code``: what the CLI exits with when this error ends a command (:mod:`gpulib.exit_codes`)."""

    exit_code = exit_codes.USAGE

    def __init__(self, message: str, *, path: str | None = None, hint: str | None = None):
        self.message = message
        self.path = path
        self.hint = hint
        super().__init__(str(self))

    def __str__(self) -> str:
        text = f"{self.path}: {self.message}" if self.path else self.message
        return f"{text} ({self.hint})" if self.hint else text


class BundleError(GpulibError):
    """An evidence bundle cannot be written or read (exists already, missing manifest, ...)."""


class InputError(GpulibError):
    """A user-supplied path or parameter is unusable."""
