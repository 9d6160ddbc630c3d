"""The nghttp2 engine's server traces' bookkeeping (agent.engines.nghttp2.server_traces): what
each program wrote of its traces (its write(2) total counts it, its socket did not send it),
the same whether its files are still there or removed."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from agent.engines.nghttp2.server_traces import GtlsServerTraces, NghttpdTraces
from agent.event_trace import TraceWriter


def test_nghttpd_s_output_is_counted_line_by_line(tmp_path: Path) -> None:
    traces = NghttpdTraces(TraceWriter(tmp_path))
    for line in ("IPv4: listen 0.0.0.0:80", "[id=1] [  0.001] closed"):
        traces.feed(line)
    assert (
        traces.output_bytes() == len("IPv4: listen 0.0.0.0:80") + len("[id=1] [  0.001] closed") + 2
    )


def test_gtlsserver_s_qlog_bytes_survive_their_files(tmp_path: Path) -> None:
    traces = GtlsServerTraces(TraceWriter(tmp_path / "events"))
    try:
        traces.started(os.getpid(), 0)  # a process that holds none of the files open
        (traces.directory / "old.sqlog").write_bytes(b"\x1e{}\n" * 10)
        traces.begin()  # a connection of no trial, closed: removed, still counted
        assert not (traces.directory / "old.sqlog").exists()
        assert traces.output_bytes() == 40
        record = b'\x1e{"qlog_version":"0.3","qlog_format":"JSON-SEQ","trace":{}}\n'
        (traces.directory / "conn.sqlog").write_bytes(record)
        assert traces.output_bytes() == 40 + len(record)
        asyncio.run(traces.finish("t1"))
        assert (tmp_path / "events" / "t1.server.sqlog").read_bytes() == record
        assert list(traces.directory.iterdir()) == []
        assert traces.output_bytes() == 40 + len(record)
    finally:
        traces.close()
    assert not traces.directory.exists()
