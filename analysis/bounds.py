"""What the protocol and the wire allow: the flow-control bound and the link bound on a page fetch.

Flow control: at any instant at most min(connection window, streams x stream window) bytes are in
flight, and a window reopens no sooner than one round trip after it was used, so

    response time >= page bytes x RTT / min(C, S x W)

with W the stream window (the swept SETTINGS_INITIAL_WINDOW_SIZE), S the streams open at once and
C the connection window: config workload.connection_window, or W when unset (the config's "the
same as the stream window", as the study did), which makes the bound page bytes x RTT / W.
Link: response time >= page bytes x 8 / link rate, drawn only when the run shaped its link.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from analysis.columns import BYTES_RECEIVED
from analysis.load import Run, config_value

PAGE_STREAMS = 7
"""Streams the study's page keeps open at once: its 1 css, 2 js and 4 jpg after the html."""


@dataclass(frozen=True)
class RttEstimate:
    rtt_s: float
    source: str  # how it was obtained, for the caption


@dataclass(frozen=True)
class Bounds:
    rtt: RttEstimate | None
    page_bytes: float | None
    page_bytes_source: str
    connection_window: int | None  # None: unset in the config
    streams: int
    link_rate_mbit: float | None

    def flow_control_s(self, windows: Sequence[int] | np.ndarray) -> np.ndarray:
        """The flow-control lower bound on the response time at each stream window, seconds."""
        w = np.asarray(windows, dtype=np.float64)
        if self.rtt is None or self.page_bytes is None:
            return np.full_like(w, math.nan)
        connection = (
            w if self.connection_window is None else np.full_like(w, float(self.connection_window))
        )
        in_flight = np.minimum(connection, self.streams * w)
        return np.asarray(self.page_bytes * self.rtt.rtt_s / in_flight, dtype=np.float64)

    @property
    def link_s(self) -> float | None:
        """The link's lower bound on the response time, seconds; None when the link is unshaped."""
        if self.link_rate_mbit is None or self.page_bytes is None:
            return None
        return self.page_bytes * 8 / (self.link_rate_mbit * 1e6)

    def caption(self) -> str:
        parts = []
        if self.rtt is None or self.page_bytes is None:
            parts.append("flow-control bound not drawn (no RTT estimate or page size in the run)")
        else:
            c = (
                f"C = {self.connection_window} B"
                if self.connection_window is not None
                else "C = W (connection window unset)"
            )
            parts.append(
                f"flow-control bound = page bytes x RTT / min(C, S x W) with "
                f"page = {self.page_bytes / 1e6:.3g} MB ({self.page_bytes_source}), "
                f"RTT = {self.rtt.rtt_s * 1e3:.3g} ms ({self.rtt.source}), S = {self.streams}, {c}"
            )
        link = self.link_s
        parts.append(
            "no link bound (link unshaped)"
            if link is None
            else f"link bound = page bytes x 8 / {self.link_rate_mbit:g} Mbit/s = {link:.3g} s"
        )
        return "; ".join(parts)


def rtt_estimate(run: Run) -> RttEstimate | None:
    """The manifest's measured `rtt_s` if present, else an upper bound from the fastest ttfb."""
    recorded = run.manifest.get("rtt_s")
    if isinstance(recorded, int | float) and not isinstance(recorded, bool) and recorded > 0:
        return RttEstimate(float(recorded), "measured, manifest rtt_s")
    if "client_ttfb_s" not in run.ok:
        return None
    ttfb = run.ok["client_ttfb_s"].dropna()
    ttfb = ttfb[ttfb > 0]
    if ttfb.empty:
        return None
    # ttfb spans the TCP handshake and the page request: at least two round trips.
    return RttEstimate(float(ttfb.min()) / 2, "upper bound: smallest client ttfb / 2")


def page_bytes(run: Run) -> tuple[float | None, str]:
    if BYTES_RECEIVED in run.ok:
        received = run.ok[BYTES_RECEIVED].dropna()
        if not received.empty and received.median() > 0:
            return float(received.median()), "median bytes received"
    total = config_value(run.manifest, "workload.total_bytes")
    if isinstance(total, int | float) and not isinstance(total, bool) and total > 0:
        return float(total), "config workload.total_bytes"
    return None, "unknown"


def bounds_of(run: Run) -> Bounds:
    size, source = page_bytes(run)
    connection = config_value(run.manifest, "workload.connection_window")
    rate = config_value(run.manifest, "link.rate_mbit")
    return Bounds(
        rtt=rtt_estimate(run),
        page_bytes=size,
        page_bytes_source=source,
        connection_window=int(connection) if isinstance(connection, int) else None,
        streams=PAGE_STREAMS,
        link_rate_mbit=float(rate) if isinstance(rate, int | float) and rate > 0 else None,
    )
