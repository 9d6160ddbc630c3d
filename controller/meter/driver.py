"""The thread a modelled meter (virtual, simavr) runs on, handing its end to its owner.

A modelled meter's `run()` loop raises MeterError when what it drives goes away (the simavr
harness exited, the pty failed). Raised on a bare thread, that error reached only
`threading.excepthook`: an "Exception in thread ..." traceback on stderr, and an owner none the
wiser. Like `SerialReader`, this thread keeps it in `error`, for its owner to read and name.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from controller.errors import MeterError


class DriverThread(threading.Thread):
    def __init__(self, run: Callable[[], None], name: str) -> None:
        super().__init__(name=name, daemon=True)
        self._loop = run
        self.error: MeterError | None = None

    def run(self) -> None:
        try:
            self._loop()
        except MeterError as exc:
            self.error = exc
        except Exception as exc:  # a bug, not the device: still the owner's to hear about
            error = MeterError(f"{self.name} failed: {type(exc).__name__}: {exc}")
            error.__cause__ = exc
            self.error = error
