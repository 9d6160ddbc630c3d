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
from dataclasses import dataclass, replace

import numpy as np

from analysis.columns import BYTES_RECEIVED, WINDOW_AXIS
from analysis.load import Run
from analysis.manifest import config_value

PAGE_STREAMS = 7
"""Streams the study's page keeps open at once: its 1 css, 2 js and 4 jpg after the html."""


@dataclass(frozen=True)
class RttEstimate:
    rtt_s: float
    source: str  # how it was obtained, for the caption
    upper_bound: bool  # True when only an upper bound was available (the line may overshoot)


@dataclass(frozen=True)
class Bounds:
    rtt: RttEstimate | None
    page_bytes: float | None
    page_bytes_source: str
    connection_window: int | None  # None: unset in the config
    streams: int
    link_rate_mbit: float | None
    # The largest RTT every measured response time allows (min of T x in-flight / page bytes).
    consistent_rtt_s: float | None = None

    def in_flight_bytes(self, windows: Sequence[int] | np.ndarray) -> np.ndarray:
        w = np.asarray(windows, dtype=np.float64)
        connection = (
            w if self.connection_window is None else np.full_like(w, float(self.connection_window))
        )
        return np.asarray(np.minimum(connection, self.streams * w), dtype=np.float64)

    def flow_control_s(self, windows: Sequence[int] | np.ndarray) -> np.ndarray:
        """The flow-control lower bound on the response time at each stream window, seconds."""
        w = np.asarray(windows, dtype=np.float64)
        if self.rtt is None or self.page_bytes is None:
            return np.full_like(w, math.nan)
        in_flight = self.in_flight_bytes(w)
        return np.asarray(self.page_bytes * self.rtt.rtt_s / in_flight, dtype=np.float64)

    @property
    def overshoots(self) -> bool:
        """The RTT estimate is larger than some measured point allows: the line is no bound."""
        return (
            self.rtt is not None
            and self.consistent_rtt_s is not None
            and self.rtt.rtt_s > self.consistent_rtt_s
        )

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
            if self.overshoots and self.consistent_rtt_s is not None:
                parts.append(
                    f"CAUTION: the line lies above some measured points, which allow an RTT of "
                    f"at most {self.consistent_rtt_s * 1e3:.3g} ms: check the RTT measurement"
                )
        link = self.link_s
        parts.append(
            "no link bound (link unshaped)"
            if link is None
            else f"link bound = page bytes x 8 / {self.link_rate_mbit:g} Mbit/s = {link:.3g} s"
        )
        return "; ".join(parts)


def rtt_estimate(run: Run) -> RttEstimate | None:
    """The manifest's measured `rtt_s` if present, else an upper bound from the fastest ttfb
    (which `bounds_of` tightens with the largest RTT the measured response times allow)."""
    recorded = run.manifest.get("rtt_s")
    if isinstance(recorded, int | float) and not isinstance(recorded, bool) and recorded > 0:
        return RttEstimate(float(recorded), "measured, manifest rtt_s", upper_bound=False)
    if "client_ttfb_s" not in run.ok:
        return None
    ttfb = run.ok["client_ttfb_s"].dropna()
    ttfb = ttfb[ttfb > 0]
    if ttfb.empty:
        return None
    # ttfb spans the TCP handshake and the page request: at least two round trips.
    return RttEstimate(
        float(ttfb.min()) / 2, "upper bound: smallest client ttfb / 2", upper_bound=True
    )


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
    bounds = Bounds(
        rtt=rtt_estimate(run),
        page_bytes=size,
        page_bytes_source=source,
        connection_window=int(connection) if isinstance(connection, int) else None,
        streams=PAGE_STREAMS,
        link_rate_mbit=float(rate) if isinstance(rate, int | float) and rate > 0 else None,
    )
    if size is None or WINDOW_AXIS not in run.axes:
        return bounds
    timed = run.ok.dropna(subset=["client_response_s"])
    if timed.empty:
        return bounds
    allowed = (
        timed["client_response_s"].to_numpy(dtype=np.float64)
        * bounds.in_flight_bytes(timed[WINDOW_AXIS].to_numpy())
        / size
    )
    consistent = float(allowed.min())
    bounds = replace(bounds, consistent_rtt_s=consistent)
    rtt = bounds.rtt
    if rtt is not None and rtt.upper_bound and rtt.rtt_s > consistent:
        # Two upper bounds on the RTT: the tighter one draws the more useful line.
        rtt = RttEstimate(
            consistent,
            f"upper bound: the largest RTT every measured point allows; "
            f"smallest ttfb / 2 = {rtt.rtt_s * 1e3:.3g} ms is larger",
            upper_bound=True,
        )
        bounds = replace(bounds, rtt=rtt)
    return bounds
