"""A command (the suite: `make test-stress`) beside a CPU burner on every core.

The burners run at this process's own priority, as the suite's parts do, so the suite gets
about half of each core and every process of it (agents, meters, peers, sshd) waits for a
core as on a busy laptop or a shared CI host. A test that passes only on an idle machine
fails here; none may (Makefile: test-stress).

    python -m tests.stress [--burners N] -- COMMAND ...
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

# A busy loop that never allocates or sleeps: a whole core's worth of demand.
_BURN = "while True: pass"


def burn(count: int) -> list[subprocess.Popen[bytes]]:
    return [
        subprocess.Popen([sys.executable, "-c", _BURN], stdin=subprocess.DEVNULL)
        for _ in range(count)
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.stress", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--burners",
        type=int,
        default=os.cpu_count() or 1,
        help="busy processes beside the command (default: one per core, %(default)s)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="after --: what to run")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run under load")
    print(
        f"stress: {args.burners} CPU burners at nice {os.nice(0)} beside: {' '.join(command)}",
        flush=True,
    )
    started = time.monotonic()
    burners = burn(args.burners)
    try:
        status = subprocess.run(command, check=False).returncode
    except KeyboardInterrupt:
        status = 128 + signal.SIGINT
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    verdict = "passed" if status == 0 else f"FAILED (status {status})"
    print(f"stress: {time.monotonic() - started:.0f} s under load, {verdict}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
