"""Files kept open and read again from their start (agent.proc_files): each read is the file's
text at that moment, for the kernel's files and the regular files a test's fake tree holds."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from agent.kernel_counters import parse_snmp
from agent.proc_files import ProcFiles


def test_a_kept_file_reads_what_it_holds_now(tmp_path: Path) -> None:
    files = ProcFiles()
    path = tmp_path / "scaling_cur_freq"
    path.write_text("1200000\n")
    assert files.read_text(path) == "1200000\n"
    path.write_text("600000\n")  # rewritten in place, as sysfs renders anew
    assert files.read_text(path) == "600000\n"
    path.write_text("x" * 200_000)  # longer than one read
    assert files.read_text(path) == "x" * 200_000


def test_a_file_that_goes_away_fails_until_it_is_back(tmp_path: Path) -> None:
    files = ProcFiles()
    path = tmp_path / "temp"
    assert files.text_or_none(path) is None
    with pytest.raises(FileNotFoundError):
        files.read_text(path)
    path.write_text("55000\n")
    assert files.text_or_none(path) == "55000\n"


@pytest.mark.skipif(sys.platform != "linux", reason="reads Linux /proc")
def test_a_kept_proc_file_is_rendered_anew_at_each_read() -> None:
    files = ProcFiles()
    snmp = Path("/proc/self/net/snmp")
    before = parse_snmp(files.read_text(snmp))["Udp"]["OutDatagrams"]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
        for _ in range(3):
            sender.sendto(b"x", ("127.0.0.1", 9))  # the discard port: sent whether or not heard
    after = parse_snmp(files.read_text(snmp))["Udp"]["OutDatagrams"]
    assert after >= before + 3  # other processes in the namespace may send too
