"""The server's trial log keeps whole lines only: a torn tail is cut when a server resumes the
log, and a write that fails part-way is taken back (the disk-full resume of a sweep depends on
both: tests/e2e/test_sweep_hardening.py)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from agent.trial_log import TAIL_CHUNK_BYTES, TrialLog, cut_torn_tail

ROOT = Path(__file__).resolve().parents[2]

records = st.lists(
    st.fixed_dictionaries({"trial_id": st.text(min_size=1, max_size=8), "n": st.integers()}),
    max_size=5,
)


def _lines(path: Path) -> list[dict[str, object]]:
    text = path.read_text(encoding="utf-8")
    assert text == "" or text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


@given(
    before=records,
    torn=st.binary(max_size=3 * TAIL_CHUNK_BYTES).map(lambda b: b.replace(b"\n", b"x")),
    after=records,
)
def test_a_resumed_log_drops_the_torn_tail_and_keeps_every_whole_line(
    before: list[dict[str, object]], torn: bytes, after: list[dict[str, object]]
) -> None:
    # Not tmp_path: hypothesis runs many examples in one function-scoped fixture.
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trials.jsonl"
        whole = b"".join(json.dumps(r).encode() + b"\n" for r in before)
        path.write_bytes(whole + torn)
        log = TrialLog(path)
        for record in after:
            log.append(record)
        log.close()
        assert _lines(path) == before + after


def test_cutting_reports_the_bytes_cut(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b'{"a":1}\n{"trial_id":"t0')
    fd = os.open(path, os.O_RDWR)
    try:
        assert cut_torn_tail(fd) == len(b'{"trial_id":"t0')
        assert cut_torn_tail(fd) == 0
    finally:
        os.close(fd)
    assert path.read_bytes() == b'{"a":1}\n'


def test_a_log_without_a_file_writes_lines_to_its_stream() -> None:
    stream = io.StringIO()
    log = TrialLog(None, stream)
    log.append({"trial_id": "t01"})
    log.close()
    assert stream.getvalue() == '{"trial_id":"t01"}\n'


def test_a_write_that_fails_part_way_leaves_no_part_of_its_line(tmp_path: Path) -> None:
    """A file-size limit (RLIMIT_FSIZE) makes the kernel write part of a line and refuse the
    rest, as a disk that fills does; no root needed to make it happen."""
    path = tmp_path / "trials.jsonl"
    limit_bytes = 1000
    script = textwrap.dedent(
        f"""
        import resource, signal
        from pathlib import Path
        from agent.trial_log import TrialLog
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death
        resource.setrlimit(resource.RLIMIT_FSIZE, ({limit_bytes}, {limit_bytes}))
        log = TrialLog(Path({str(path)!r}))
        written = 0
        try:
            while True:
                log.append({{"trial_id": f"t{{written:03d}}", "pad": "x" * 70}})
                written += 1
        except OSError as exc:
            print(written, exc.errno)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    written, errno = map(int, result.stdout.split())
    assert errno == 27  # EFBIG
    lines = _lines(path)
    assert [line["trial_id"] for line in lines] == [f"t{i:03d}" for i in range(written)]
    assert 0 < path.stat().st_size <= limit_bytes
