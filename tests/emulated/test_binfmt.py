"""binfmt_misc set-up for the emulated nodes, where binfmt_misc is really unmounted: a mount
namespace of the test's own (binfmt_misc's entries are the kernel's, shared; only the mount is
private), in which the armhf and arm64 set-ups race each other from two threads and a second
process, as .ci/run's root builder and a test session do. A fresh machine mounted it twice and
failed the second time ("already mounted")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require_tool
from tests.netns import require_root

pytestmark = pytest.mark.root

REPO = Path(__file__).resolve().parents[2]

# Both arches at once from two threads of this process and from one more process, released
# together by a barrier, then what the namespace sees.
_RACE = """
import multiprocessing, sys, threading
from pathlib import Path
from tests.emulated import rootfs

def together(barrier):
    failures = []
    def run(arch):
        barrier.wait()
        try:
            rootfs.enable_binfmt(arch)
        except rootfs.RootfsError as exc:
            failures.append(str(exc))
    threads = [threading.Thread(target=run, args=(arch,)) for arch in rootfs.ARCHES]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failures

if __name__ == "__main__":
    barrier = multiprocessing.Barrier(2 * len(rootfs.ARCHES))
    other = multiprocessing.Process(target=lambda: sys.exit(1 if together(barrier) else 0))
    other.start()
    failures = together(barrier)
    other.join()
    print("failures:", failures, "other exit:", other.exitcode)
    names = [arch.binfmt for arch in rootfs.ARCHES.values()]
    enabled = [name for name in names if (Path("/proc/sys/fs/binfmt_misc") / name).exists()]
    print("mounted:", (Path("/proc/sys/fs/binfmt_misc") / "register").exists(), "entries:", enabled)
    sys.exit(0 if not failures and other.exitcode == 0 and enabled == names else 1)
"""


def test_binfmt_is_mounted_once_when_both_arches_race_on_an_unmounted_machine() -> None:
    require_root()
    require_tool("unshare", "update-binfmts")
    script = (
        # Unmounted in this namespace only (it may not be mounted at all on a fresh machine).
        "umount /proc/sys/fs/binfmt_misc 2>/dev/null; "
        'test ! -e /proc/sys/fs/binfmt_misc/register || { echo "still mounted"; exit 99; }; '
        'exec "$0" -c "$1"'
    )
    done = subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
            sys.executable,
            _RACE,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "failures: [] other exit: 0" in done.stdout
