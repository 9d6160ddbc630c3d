"""Where the source checkout keeps what the controller builds from, beside the controller package.

A leaf (it imports nothing of ours): the firmware package builds and flashes from
`FIRMWARE_DIR`, and the meter package builds the simavr harness from it, while the firmware
package uses the meter's decoder to check a flashed board; neither may import the other's
paths without a cycle.
"""

from __future__ import annotations

from pathlib import Path

# The firmware sources sit beside the controller package in the repository checkout.
FIRMWARE_DIR = Path(__file__).resolve().parents[1] / "firmware"
