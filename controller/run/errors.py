"""Why a run directory could not be written: the run package's exception tree.

A write that fails leaves nothing half-written behind (the recorder cuts a row back, removes a
temporary file), so the run as it stood before the write stays whole and resumable.
"""

from __future__ import annotations

import errno
import shlex
from pathlib import Path

from controller.errors import ControllerError

_FULL = {errno.ENOSPC, errno.EDQUOT}


class RunWriteError(ControllerError):
    """Writing `path` under the run directory `run_dir` failed with `errno_code` (the OS's)."""

    def __init__(self, message: str, *, run_dir: Path, path: Path, errno_code: int | None) -> None:
        super().__init__(message)
        self.run_dir = run_dir
        self.path = path
        self.errno_code = errno_code


class RunDiskFull(RunWriteError):
    """The run's disk (or the user's quota on it) is full: free space, then resume the run."""

    exit_status = 4


def disk_full(run_dir: Path, path: Path, detail: str) -> RunDiskFull:
    """One line: the run directory, that its disk is full, and how to go on."""
    return RunDiskFull(
        f"{run_dir}: the disk is full ({detail}); every row before it is kept: free some space, "
        f"then h2iot sweep --resume {shlex.quote(str(run_dir))}",
        run_dir=run_dir,
        path=path,
        errno_code=errno.ENOSPC,
    )


def write_error(run_dir: Path, path: Path, exc: OSError) -> RunWriteError:
    """The error to raise for `exc`, met writing `path`: one line naming the run directory."""
    if exc.errno in _FULL:
        return disk_full(run_dir, path, f"writing {path.name}")
    return RunWriteError(
        f"{run_dir}: cannot write {path.name}: {exc.strerror or exc}",
        run_dir=run_dir,
        path=path,
        errno_code=exc.errno,
    )
