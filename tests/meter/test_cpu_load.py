"""CPU accounting of a process tree whose children come and go, and the power model."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.errors import ConfigError
from controller.meter.cpu_load import (
    CgroupCpu,
    ProcessTreeCpu,
    TreeLedger,
    TreeMember,
    Utilisation,
)
from controller.meter.power_model import PI_3B

# A parent that runs two short-lived busy children one after the other, then reports its own and
# its reaped children's CPU time (getrusage: the kernel's count, the truth here) and waits.
PARENT = """
import resource, subprocess, sys
busy = "import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.3: pass"
for _ in range(2):
    subprocess.run([sys.executable, "-c", busy], check=True)
used = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
print(sum(u.ru_utime + u.ru_stime for u in used), flush=True)
sys.stdin.readline()
"""


def test_tree_cpu_counts_children_that_have_exited_once():
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    try:
        tree = ProcessTreeCpu(parent.pid)
        members_seen = 1
        # Read the tree while the children run (so it sees them come and go), until the parent
        # reports; select's timeout only paces the readings.
        while not select.select([parent.stdout], [], [], 0.02)[0]:
            tree.cpu_seconds()
            members_seen = max(members_seen, len(tree.members))
        truth = float(parent.stdout.readline())
        measured = tree.cpu_seconds()
    finally:
        parent.kill()
        parent.wait()
    assert members_seen >= 2  # it did see a child alive
    assert truth >= 0.6  # both children's 0.3 s
    # Each child's time counted once: alive in its own entry, then in the parent's children_*
    # (/proc counts in 10 ms ticks, so a few ticks either way).
    assert measured == pytest.approx(truth, abs=0.05)


def test_unknown_pid_is_a_one_line_error():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    with pytest.raises(ConfigError, match=rf"--watch-pid {process.pid}: no such process"):
        ProcessTreeCpu(process.pid)


def test_utilisation_is_clamped_and_carries_the_excess():
    cpu = iter([0.0, 3.0, 3.0, 3.0])
    load = Utilisation(lambda: next(cpu), cores=4, now_s=0.0)
    # 3 CPU-seconds in 0.5 s on 4 cores: 2 s of capacity now, the rest next interval
    assert load.update(0.5) == pytest.approx(1.0)
    assert load.update(1.0) == pytest.approx(0.5)
    assert load.update(1.0) == pytest.approx(0.5)  # no time passed: the same value
    assert load.update(2.0) == pytest.approx(0.0)


def test_pi_3b_model_ends():
    assert PI_3B.power_mw(0.0) == 1200.0
    assert PI_3B.power_mw(1.0) == pytest.approx(3950.0)
    assert PI_3B.power_mw(0.5) == pytest.approx(1200.0 + 1375.0)
    assert PI_3B.power_mw(7.0) == pytest.approx(3950.0)


# A parent whose shell starts a grandchild and exits when told to (a line on the parent's
# stdin): the grandchild is reparented to init, which reaps it, so its time never reaches anyone
# in the tree. The grandchild says it runs (its pid in argv[1]), is busy only once orphaned, then
# says so (argv[2]) and waits to be killed.
ORPHAN = """
import os, sys, time
parent = os.getppid()
with open(sys.argv[1] + ".new", "w") as file:
    file.write(str(os.getpid()))
os.replace(sys.argv[1] + ".new", sys.argv[1])
while os.getppid() == parent:
    time.sleep(0.01)
t = time.process_time()
while time.process_time() - t < 0.4:
    pass
open(sys.argv[2], "w").close()
time.sleep(60)
"""
ORPHANING = """
import subprocess, sys, time
shell = f'"{sys.executable}" -c "$0" "$1" "$2" & read line'
subprocess.run(["sh", "-c", shell, *sys.argv[1:]], check=True)
time.sleep(60)
"""


def _poll(tree: ProcessTreeCpu, done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 60  # a guard against a hang, not a timing assertion
    while not done():
        assert time.monotonic() < deadline
        tree.cpu_seconds()
        time.sleep(0.01)


def test_time_of_an_orphan_reaped_by_init_is_kept(tmp_path):
    running, spun = tmp_path / "running", tmp_path / "spun"
    parent = subprocess.Popen(
        [sys.executable, "-c", ORPHANING, ORPHAN, str(running), str(spun)],
        stdin=subprocess.PIPE,
        text=True,
    )
    assert parent.stdin is not None
    orphan = 0
    try:
        tree = ProcessTreeCpu(parent.pid)
        _poll(tree, running.exists)
        orphan = int(running.read_text())
        tree.cpu_seconds()  # a scan while the shell still waits: the grandchild is in the tree
        assert orphan in tree.members
        parent.stdin.write("\n")  # the shell's `read` returns and it exits
        parent.stdin.flush()
        _poll(tree, spun.exists)
        tree.cpu_seconds()  # its last reading alive holds all its busy time
        os.kill(orphan, signal.SIGKILL)
        _poll(tree, lambda: len(tree.members) == 1)  # shell and orphan came and went
        assert tree.cpu_seconds() >= 0.4  # the orphan's time is still counted after it died
    finally:
        parent.kill()
        parent.wait()
        if orphan:
            with contextlib.suppress(ProcessLookupError):
                os.kill(orphan, signal.SIGKILL)


def test_cgroup_cpu_reads_usage_usec(tmp_path):
    (tmp_path / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\n")
    assert CgroupCpu(tmp_path).cpu_seconds() == 2.5
    with pytest.raises(ConfigError, match=r"no cpu\.stat"):
        CgroupCpu(tmp_path / "nope")


# The booking rules, pure: a snapshot of (pid, parent, start, CPU so far) per reading.


def _m(pid: int, cpu_s: float, start_s: float = 0.0, parent: int = 1) -> TreeMember:
    return TreeMember(pid, parent, start_s, cpu_s)


def test_a_member_known_from_the_start_books_what_it_used_since():
    ledger = TreeLedger(10.0, [_m(1, 5.0, parent=0)])
    assert ledger.update(10.1, [_m(1, 5.02, parent=0)]) == pytest.approx(0.02)
    assert ledger.update(10.2, [_m(1, 5.05, parent=0)]) == pytest.approx(0.05)


def test_a_process_found_late_books_only_the_share_of_its_life_since_the_last_reading():
    """Today's defect, in the ledger's terms: an interpreter found 0.2 s into its life with 0.2 s
    of start-up behind it was booked whole at once (and then carried into the trial)."""
    ledger = TreeLedger(0.0, [_m(1, 0.0, parent=0)])
    ledger.update(1.0, [_m(1, 0.0, parent=0)])
    booked = ledger.update(1.01, [_m(1, 0.0, parent=0), _m(2, 0.2, start_s=0.81)])
    assert booked == pytest.approx(0.2 * 0.01 / 0.2)  # the last 10 ms of its 200 ms life
    assert ledger.late_s == pytest.approx(0.2 * 0.19 / 0.2)  # spent before: not booked later


def test_a_process_started_since_the_last_reading_is_booked_whole():
    ledger = TreeLedger(0.0, [_m(1, 0.0, parent=0)])
    booked = ledger.update(0.01, [_m(1, 0.0, parent=0), _m(2, 0.008, start_s=0.001)])
    assert booked == pytest.approx(0.008)
    assert ledger.late_s == 0.0


def test_a_child_reaped_inside_the_tree_is_not_counted_twice():
    ledger = TreeLedger(0.0, [_m(1, 1.0, parent=0), _m(2, 0.5)])
    ledger.update(0.1, [_m(1, 1.0, parent=0), _m(2, 0.7)])  # the child used 0.2 s
    # It exits with 0.75 s and its parent reaps it: 0.75 s moves into the parent's children_*.
    assert ledger.update(0.2, [_m(1, 1.75, parent=0)]) == pytest.approx(0.25)


def test_a_dip_between_readings_is_repaid_before_anything_is_booked():
    ledger = TreeLedger(0.0, [_m(1, 1.0, parent=0), _m(2, 0.5)])
    # The child was reaped after its parent was read, before it was: 0.5 s vanish for now.
    assert ledger.update(0.1, [_m(1, 1.0, parent=0)]) == 0.0
    assert ledger.update(0.2, [_m(1, 1.6, parent=0)]) == pytest.approx(0.1)


def test_a_member_reaped_outside_the_tree_keeps_its_last_reading():
    ledger = TreeLedger(0.0, [_m(1, 1.0, parent=0), _m(2, 0.0, parent=1)])
    ledger.update(0.1, [_m(1, 1.0, parent=0), _m(2, 0.3, parent=99)])  # reparented to init
    assert ledger.update(0.2, [_m(1, 1.0, parent=0)]) == pytest.approx(0.3)


@given(
    st.lists(
        st.tuples(
            st.floats(0.0, 0.05),  # CPU the process uses per reading while alive
            st.integers(1, 20),  # the reading it starts after
            st.integers(1, 20),  # readings it lives
        ),
        max_size=6,
    )
)
def test_every_cpu_second_is_booked_once_or_counted_late(processes):
    """Children of the root, reaped by it: booked + late = all the CPU they used."""
    ledger = TreeLedger(0.0, [_m(1, 0.0, parent=0)])
    reaped = 0.0
    total = 0.0
    for reading in range(1, 45):
        now = reading * 0.01
        members = [_m(1, reaped, parent=0)]
        for pid, (rate, start, life) in enumerate(processes, start=2):
            if start < reading <= start + life:
                members.append(_m(pid, rate * (reading - start), start_s=(start - 0.5) * 0.01))
            elif reading == start + life + 1:
                reaped += rate * life  # reaped by the root: into its children_* time
        ledger.update(now, members)
        total = sum(rate * min(life, max(0, reading - start)) for rate, start, life in processes)
    assert ledger.booked_s + ledger.late_s == pytest.approx(total, abs=1e-9)


def test_a_real_child_is_booked_while_it_runs_not_after(tmp_path):
    """A child busy for 0.3 s from its start: its time is booked by the reading after it said
    it was done, and nothing after that (an interpreter found late was booked whole, later)."""
    done = tmp_path / "done"
    script = (
        "import sys, time\nt = time.process_time()\n"
        "while time.process_time() - t < 0.3: pass\n"
        "open(sys.argv[1], 'w').close()\ntime.sleep(30)"
    )
    parent = subprocess.Popen([sys.executable, "-c", PARENT_OF_ONE, script, str(done)])
    try:
        tree = ProcessTreeCpu(parent.pid)
        _poll(tree, done.exists)
        at_done = tree.cpu_seconds()
        assert at_done >= 0.3
        assert tree.late_s < 0.05  # found within a reading of its start
        time.sleep(0.3)
        assert tree.cpu_seconds() - at_done < 0.05  # idle since
    finally:
        parent.kill()
        parent.wait()


PARENT_OF_ONE = """
import subprocess, sys, time
time.sleep(0.2)
subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
time.sleep(60)
"""
