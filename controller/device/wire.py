"""The relay that carries a wired local link (`controller.device.netns`) with a fixed delay.

It runs as a child of the controller inside the link's wire namespace, for the length of a
sweep: `start_relay` waits for it to say `ready`; `RelayProcess.stop` asks it to stop and reads
the JSON it leaves (frames, bytes, how late frames left, its CPU time) for the run folder.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.device.errors import EmulationError
from controller.device.netns import WIRE, WIRE_ENDS, LocalLink, run_inside

STOP_TIMEOUT_S = 10.0


@dataclass
class RelayProcess:
    process: subprocess.Popen[str]
    stats_path: Path
    delay_us: float

    def stop(self) -> dict[str, Any]:
        """Stop it; what it carried (its stats file), or a reason it has none."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        try:
            found: dict[str, Any] = json.loads(self.stats_path.read_text())
        except (OSError, ValueError):
            return {"delay_us": self.delay_us, "error": f"exit status {self.process.returncode}"}
        return found


def start_relay(link: LocalLink, delay_us: float, stats_path: Path) -> RelayProcess:
    """The relay between the wire namespace's two ends, delaying each frame by delay_us."""
    command = [
        sys.executable, "-m", "controller.link.relay",
        "--a", WIRE_ENDS["client"], "--b", WIRE_ENDS["server"],
        "--delay-us", f"{delay_us:g}", "--stats", str(stats_path),
    ]  # fmt: skip

    def spawn() -> subprocess.Popen[str]:
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    process = run_inside(link.namespace(WIRE), spawn)
    assert process.stdout is not None
    if process.stdout.readline().strip() != "ready":
        process.kill()
        _, error = process.communicate()
        detail = error.strip().splitlines()
        raise EmulationError(f"relay did not start: {detail[-1] if detail else 'no output'}")
    return RelayProcess(process, stats_path, delay_us)
