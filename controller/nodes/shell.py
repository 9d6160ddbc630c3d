"""Shell command lines for nodes, built with shlex quoting only, and parsers of their output.

Pure functions: the same strings run under `/bin/sh -c` locally and in the login shell over SSH,
so local and SSH nodes share one code path. A background process is identified by its pid *and*
its start time (field 22 of /proc/PID/stat), so a stale pidfile whose pid was reused after a
reboot never gets a signal sent to an unrelated process.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence

from controller.nodes.records import NewLines, StopOutcome

TIMEOUT_EXIT_STATUS = 124  # coreutils timeout: the command ran out of time
KILLED_EXIT_STATUS = 137  # 128 + SIGKILL: timeout's -k needed to KILL it
POLL_S = 0.05

# "STATE STARTTIME" of a pid, empty when there is no such process. The state follows the last ')'
# (the command name may contain spaces and parentheses).
_IDENTITY = 'ident() { sed "s/.*) //" "/proc/$1/stat" 2>/dev/null | awk \'{print $1, $20}\'; }'
# Sets pid and succeeds while the pidfile's process (same pid, same start time) is alive.
_ALIVE = (
    'alive() { read -r pid start < "$1" 2>/dev/null || return 1; '
    'case $pid in ""|*[!0-9]*) return 1;; esac; '
    'case $(ident "$pid") in "Z "*|"") return 1;; *" $start") return 0;; esac; return 1; }'
)


def join(argv: Sequence[str]) -> str:
    """A command line running argv exactly, whatever characters its words hold."""
    return shlex.join(argv)


def expand_home(path: str, home: str) -> str:
    """`~` or `~/...` made absolute with the node's home; other paths unchanged."""
    if path == "~":
        return home
    if path.startswith("~/"):
        return home.rstrip("/") + path[1:]
    return path


def with_timeout(command: str, timeout_s: float) -> str:
    """Run command under coreutils `timeout`, which kills its whole process group when late.

    Over SSH a client-side timeout would leave the remote command running; this does not.
    """
    return f"exec timeout -k 2 {timeout_s:.3f} /bin/sh -c {shlex.quote(command)}"


def is_timeout(exit_status: int, duration_s: float, timeout_s: float) -> bool:
    return exit_status == TIMEOUT_EXIT_STATUS or (
        exit_status == KILLED_EXIT_STATUS and duration_s >= timeout_s
    )


def start_background(argv: Sequence[str], pidfile: str, log: str) -> str:
    """Start argv detached (no terminal, all streams redirected), record pid and start time.

    `nohup` execs the command, so `$!` is the command's own pid; `cmd && other &` would
    background a subshell instead. Prints the pid.
    """
    q_pidfile = shlex.quote(pidfile)
    return "\n".join(
        [
            _IDENTITY,
            f"nohup {join(argv)} >{shlex.quote(log)} 2>&1 </dev/null &",
            "pid=$!",
            f'echo "$pid $(ident "$pid" | cut -d" " -f2)" >{q_pidfile}',
            'echo "$pid"',
        ]
    )


def running_pid(pidfile: str) -> str:
    """Prints the pidfile's pid if that very process is alive (not a zombie), else nothing."""
    return "\n".join([_IDENTITY, _ALIVE, f'if alive {shlex.quote(pidfile)}; then echo "$pid"; fi'])


def stop_background(pidfile: str, grace_s: float) -> str:
    """TERM the pidfile's process, wait up to grace_s, KILL it if still there; print the outcome."""
    q_pidfile = shlex.quote(pidfile)
    polls = max(1, math.ceil(grace_s / POLL_S))
    wait = "i=0; while alive {p} && [ $i -lt {n} ]; do sleep {s}; i=$((i+1)); done"
    return "\n".join(
        [
            _IDENTITY,
            _ALIVE,
            f"if ! alive {q_pidfile}; then rm -f -- {q_pidfile}; echo not-running; exit 0; fi",
            'kill -TERM "$pid" 2>/dev/null',
            wait.format(p=q_pidfile, n=polls, s=POLL_S),
            f'if alive {q_pidfile}; then outcome=killed; kill -KILL "$pid" 2>/dev/null; '
            + wait.format(p=q_pidfile, n=polls, s=POLL_S)
            + "; else outcome=terminated; fi",
            f"if alive {q_pidfile}; then echo still-running; exit 1; fi",
            f"rm -f -- {q_pidfile}",
            'echo "$outcome"',
        ]
    )


def parse_stop_outcome(stdout: str) -> StopOutcome:
    word = stdout.strip()
    if word == "not-running":
        return "not-running"
    if word == "terminated":
        return "terminated"
    if word == "killed":
        return "killed"
    raise ValueError(f"unexpected stop output {word!r}")


def read_since(path: str, offset_bytes: int) -> str:
    """Print the file's size on one line, then its bytes from offset on; nothing if it is absent."""
    q_path = shlex.quote(path)
    return (
        f"[ -e {q_path} ] || exit 0; stat -c %s -- {q_path}; "
        f"tail -c +{offset_bytes + 1} -- {q_path}"
    )


def parse_new_lines(stdout: str, offset_bytes: int) -> NewLines:
    """The complete lines in `read_since` output; a partial last line waits for the next read.

    Raises ValueError when the file is shorter than offset (truncated or replaced) or gone.
    """
    if not stdout:
        if offset_bytes:
            raise ValueError("the file is gone")
        return NewLines((), 0)
    size_text, _, data = stdout.partition("\n")
    if int(size_text) < offset_bytes:
        raise ValueError(f"the file shrank to {size_text} bytes, below offset {offset_bytes}")
    complete, newline, _ = data.rpartition("\n")
    if not newline:
        return NewLines((), offset_bytes)
    text = complete + newline
    return NewLines(tuple(complete.split("\n")), offset_bytes + len(text.encode()))


def home() -> str:
    return 'printf "%s\\n" "$HOME"'


CLOCK_LOOP = (
    "import sys, time\n"
    "read = sys.stdin.buffer.readline\n"
    "out = sys.stdout.buffer\n"
    "while read():\n"
    "    out.write(b'%d %d\\n' % (time.time_ns(), time.monotonic_ns()))\n"
    "    out.flush()\n"
)
"""Answers each line it reads with the node's wall and monotonic clocks, in ns."""


def clock_loop(python: str) -> str:
    return f"exec {shlex.quote(python)} -u -c {shlex.quote(CLOCK_LOOP)}"
