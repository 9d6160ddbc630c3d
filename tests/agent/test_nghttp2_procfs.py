"""/proc parsers on canned text, and the probe on live processes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from agent.engines.nghttp2.process import run_child
from agent.engines.nghttp2.procfs import (
    ProcessProbe,
    listening_ports,
    parse_hwm_bytes,
    parse_io,
    parse_schedstat,
    parse_stat_ticks,
    socket_inode,
)
from tests.conftest import as_ordinary_user

REPO = Path(__file__).resolve().parents[2]

STAT = (
    "4242 (nghttpd (x) y) S 1 4242 4242 0 -1 4194560 180 0 0 0 37 12 0 0 20 0 1 0 "
    "123 12345678 900 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0"
)
TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:AE03 00000000:0000 0A 00000000:00000000 00:00000000 00000000  0  0 225928 1 0
   1: 0100007F:AE03 0100007F:C350 01 00000000:00000000 00:00000000 00000000  0  0 225999 1 0
   2: 00000000:21FD 00000000:0000 0A 00000000:00000000 00:00000000 00000000  0  0 63857 1 0
"""


def test_parsers() -> None:
    assert parse_schedstat("78176 2856549 2\n") == 78176
    assert parse_stat_ticks(STAT) == (37, 12)  # a ")" in the command name is no trouble
    assert parse_hwm_bytes("Name:\tx\nVmHWM:\t   7168 kB\nVmRSS:\t 100 kB\n") == 7168 * 1024
    assert parse_hwm_bytes("Name:\tx\nState:\tZ (zombie)\n") is None
    assert parse_io("rchar: 10\nwchar: 20\nsyscr: 1\n") == {"rchar": 10, "wchar": 20, "syscr": 1}
    assert listening_ports(TCP, {225928, 225999}) == {225928: 0xAE03}
    assert socket_inode("socket:[225928]") == 225928
    assert socket_inode("/dev/null") is None


def test_probe_reads_a_live_child() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import socket,sys;s=socket.socket();s.bind(('127.0.0.1',0));"
         "s.listen();print(s.getsockname()[1],flush=True);sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        probe = ProcessProbe(child.pid)
        assert probe.listening_ports() == [port]
        before = probe.sample()
        assert before.runtime_ns > 0 and before.wchar is not None
        assert probe.reset_peak_rss()
        peak = probe.peak_rss_bytes()
        assert peak is not None and peak > 0
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait()


def test_probe_of_self_sees_its_own_listening_socket() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        assert sock.getsockname()[1] in ProcessProbe(os.getpid()).listening_ports()


def test_a_childs_final_io_is_read_as_its_own_user() -> None:
    """The write counters at exit, also of a child gone before anyone looked (the kernel refuses
    an ordinary user a zombie's /proc/PID/io); as root the same runs as nobody (with Debian's
    interpreter, which nobody can reach)."""
    code = (
        "import json; from agent.engines.nghttp2.process import run_child; "
        "c = run_child(['/bin/sh', '-c', 'head -c 70000 /dev/zero > /dev/null; echo done'], 30); "
        "print(json.dumps([c.io, c.io_unavailable, c.stdout.decode()]))"
    )
    result = subprocess.run(
        as_ordinary_user(["/usr/bin/python3", "-c", code]),
        capture_output=True, text=True, check=False, timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    io, unavailable, stdout = json.loads(result.stdout)
    assert unavailable is None and stdout == "done\n"
    # head's 70000 bytes (reaped by the shell, so counted in its io) and the shell's echo.
    assert io["wchar"] == 70000 + len("done\n")
    assert io["syscw"] >= 2 and "rchar" not in io


def test_threads_ending_while_the_probe_reads_are_no_error() -> None:
    """A thread that ends between the listing of /proc/PID/task and the read of its schedstat
    is passed over (found as an error by the suite run as nobody under load)."""
    probe = ProcessProbe(os.getpid())
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            workers = [threading.Thread(target=sum, args=(range(100),)) for _ in range(8)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()

    churner = threading.Thread(target=churn)
    churner.start()
    try:
        readings = [probe.runtime_ns() for _ in range(3000)]
    finally:
        stop.set()
        churner.join()
    assert all(reading > 0 for reading in readings)


def test_a_child_writing_to_a_file_is_waited_for_and_killed_at_its_timeout(tmp_path: Path) -> None:
    """The periodic client's way (output read after the trial): both streams in the file, the
    child's own CPU from wait4, its exit status; one that outlives its timeout is killed."""
    output = tmp_path / "out"
    script = "echo out; echo err >&2; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; exit 3"
    done = run_child(["/bin/sh", "-c", script], 30, output)
    assert (done.exit_status, done.timed_out, done.stdout, done.stderr) == (3, False, b"", b"")
    assert sorted(output.read_text().split()) == ["err", "out"]
    assert done.cpu_user_s + done.cpu_sys_s > 0 and done.t_mono_end_ns > done.t_mono_start_ns
    killed = run_child(["/bin/sleep", "60"], 0.2, tmp_path / "slept")
    assert (killed.exit_status, killed.timed_out) == (-signal.SIGKILL, True)
