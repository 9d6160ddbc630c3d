"""The software marker line (agent.marker.FifoMarker): each edge waits until the meter has read
it, so the node does nothing between an edge's instant and the meter's reading at it (the
virtual meter books that reading up to the instant); a file, or a FIFO nobody reads, holds no
trial up."""

from __future__ import annotations

import threading
from pathlib import Path

from agent.marker import FifoMarker
from controller.meter.node_power import MarkerEdge, MarkerFifo


def test_an_edge_returns_only_once_the_meter_has_read_it(tmp_path: Path) -> None:
    fifo = MarkerFifo(tmp_path / "marker")
    marker = FifoMarker(str(tmp_path / "marker"), read_wait_s=600.0)  # the read ends the wait
    stamps: list[int] = []
    raised = threading.Thread(target=lambda: stamps.append(marker.raise_line()))
    try:
        raised.start()
        edges: list[MarkerEdge] = []
        while not edges:  # the line, once written; the wait goes on until it is read
            assert not stamps, "the edge returned before the meter read it"
            edges = fifo.edges(1e9)
        raised.join()
    finally:
        marker.close()
        fifo.close()
    assert edges == [MarkerEdge(1, stamps[0] / 1e9)]


def test_a_fifo_nobody_reads_costs_an_edge_its_bounded_wait_only(tmp_path: Path) -> None:
    fifo = MarkerFifo(tmp_path / "marker")  # opened, never read: a meter whose thread died
    marker = FifoMarker(str(tmp_path / "marker"), read_wait_s=0.01)
    try:
        rose_ns, fell_ns = marker.raise_line(), marker.lower_line()
        assert [edge.level for edge in fifo.edges(1e9)] == [1, 0]
    finally:
        marker.close()
        fifo.close()
    assert fell_ns > rose_ns


def test_a_regular_file_gets_the_lines_without_a_wait(tmp_path: Path) -> None:
    log = tmp_path / "edges.log"
    log.touch()
    marker = FifoMarker(str(log), read_wait_s=600.0)
    try:
        rose_ns = marker.raise_line()
    finally:
        marker.close()
    assert log.read_text() == f"1 {rose_ns}\n"
