"""Why a sweep cannot go on: the sweep package's exception tree, under `ControllerError`.

None of these is a failed trial (that is a recorded row, retried): the engine pauses the sweep
on a `SweepError`, records why, and the run can be resumed. Each names what was lost.
"""

from __future__ import annotations

from controller.config.model import Role
from controller.errors import ControllerError


class SweepError(ControllerError):
    """The sweep stopped before its plan was done; the run is resumable."""


class NodeLost(SweepError):
    """A node stopped answering (not a failed trial): the sweep pauses, resumable."""

    def __init__(self, message: str, *, role: Role) -> None:
        super().__init__(message)
        self.role = role


class MeterLost(SweepError):
    """The meter stopped delivering samples: the sweep pauses, resumable. `port` is the
    meter's serial device; the cause, when there is one, is chained (`__cause__`)."""

    def __init__(self, message: str, *, port: str) -> None:
        super().__init__(message)
        self.port = port


class SweepPaused(SweepError):
    """The user asked the sweep to stop (Ctrl-C); it stops after the trial in flight."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
