"""The analysis package's one exception tree.

`analysis` may not import the controller (the dependency rule), so it has its own root. The
`h2iot report` command catches `AnalysisError` like a `ControllerError`: same one-line message,
same exit statuses (2 for a bad input folder, 1 otherwise).
"""

from __future__ import annotations


class AnalysisError(Exception):
    """Root of every error the analysis raises on purpose."""

    exit_status = 1


class RunFormatError(AnalysisError):
    """A run folder is malformed or partial; the message names the file and the key or line."""

    exit_status = 2


class ComparisonError(AnalysisError):
    """Runs asked to be compared cannot be (different swept settings, the same run twice)."""

    exit_status = 2
