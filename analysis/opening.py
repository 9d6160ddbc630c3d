"""The report's first screen: what ran (one sentence), the warnings that change how to read the
results, the headline figure, then the findings (`analysis.findings`).

The sentence names the workload, the swept axes with their values, where the nodes ran, how
the client ran where the run chose other than the defaults (uvloop, bodies checked by size), the
meter, the ok trials per point and when the run was made (ISO 8601 in the run's zone, and
where that zone comes from: `analysis.times`). At most MAX_CAVEATS warnings are listed; the
count of the others follows, each section below still has them all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from analysis.document import Block, Bullets, Heading, Image, Paragraph
from analysis.facts import text_of
from analysis.load import Run
from analysis.manifest import config_value
from analysis.points import plain
from analysis.tables import value_text
from analysis.times import created_ns, iso, zone_of

MAX_CAVEATS = 5
_LISTED_VALUES = 4  # more values than this read as a range


def _axis_text(run: Run, axis: str) -> str:
    values = sorted({plain(v) for v in run.ok[axis]}, key=lambda v: (str(type(v)), v))
    shown = [value_text(v) for v in values]
    if len(shown) > _LISTED_VALUES and run.axis_kinds.get(axis) != "category":
        return f"{axis} {shown[0]} .. {shown[-1]} ({len(shown)} values)"
    return f"{axis} {', '.join(shown)}"


def _place(run: Run, role: str) -> str:
    device = run.manifest.get("device")
    nodes = device.get("nodes") if isinstance(device, Mapping) else None
    emulated = nodes.get(role) if isinstance(nodes, Mapping) else None
    host = config_value(run.manifest, f"nodes.{role}.host") or "local"
    if isinstance(emulated, Mapping):
        where = emulated.get("host", "local")
        where = "this machine" if where == "local" else where
        return f"emulated as {emulated.get('profile', 'custom')} on {where}"
    if host == "local":
        return "on this machine's own cores, unthrottled"
    return f"on {host}"


def _nodes_text(run: Run, client_nodes: Sequence[Mapping[str, str]]) -> str:
    clients = len({row["node"] for row in client_nodes if row.get("node")})
    client = f"{clients} client nodes" if clients > 1 else "client"
    places = {role: _place(run, role) for role in ("client", "server")}
    if places["client"] == places["server"]:
        return f"{client} and server {places['client']}"
    return f"{client} {places['client']}, server {places['server']}"


def _meter_text(manifest: Mapping[str, Any]) -> str:
    meter = manifest.get("meter")
    recorded: Mapping[str, Any] = meter if isinstance(meter, Mapping) else {}
    source = recorded.get("source") or config_value(manifest, "meter.source")
    if source is None:
        return "no meter recorded"
    rate = recorded.get("sample_rate_hz") or config_value(manifest, "meter.rate_hz")
    at = f" at {rate:g} Hz" if isinstance(rate, int | float) else ""
    return f"the {text_of(source)} meter{at}"


def agents_text(manifest: Mapping[str, Any]) -> str:
    """How the agents did their part where a run chose other than the defaults (their event
    loops, bodies checked by size alone): each changes what their CPU figures hold. Empty
    otherwise."""
    parts = [
        f"the {side} on uvloop"
        for side, key in (("client", "run.event_loop"), ("server", "run.server_event_loop"))
        if config_value(manifest, key) == "uvloop"
    ]
    if config_value(manifest, "workload.verify") == "size":
        parts.append("bodies checked by size alone (no sha256)")
    return "".join(f"; {part}" for part in parts)


def _n_text(run: Run) -> str:
    counts = run.ok.groupby(list(run.axes)).size()
    low, high = int(counts.min()), int(counts.max())
    n = f"n = {low}" if low == high else f"n = {low} .. {high}"
    points = f" at {len(counts)} points" if len(counts) > 1 else ""
    return f"{n} ok trials per point{points}, {run.confidence * 100:g} % CIs"


def what_ran(run: Run, client_nodes: Sequence[Mapping[str, str]] = ()) -> str:
    """One sentence: workload, axes, nodes, meter, n per point, when (module doc)."""
    zone = zone_of(run.manifest, run.name)
    created = created_ns(run.manifest)
    when = (
        f"started {iso(created, zone)} ({zone.describe()})"
        if created is not None
        else f"no start time recorded (times in {zone.describe()})"
    )
    axes = " and ".join(_axis_text(run, axis) for axis in run.axes)
    return (
        f"What ran: the {run.workload} workload over {axes}; {_nodes_text(run, client_nodes)}"
        f"{agents_text(run.manifest)}; {_meter_text(run.manifest)}; {_n_text(run)}; {when}."
    )


def caveat_blocks(caveats: Sequence[str]) -> list[Block]:
    if not caveats:
        return []
    shown = list(caveats[:MAX_CAVEATS])
    if len(caveats) > MAX_CAVEATS:
        shown.append(f"... and {len(caveats) - MAX_CAVEATS} more in the sections below.")
    return [Paragraph("Read the results with care:"), Bullets(tuple(shown), True)]


def first_screen(
    run: Run,
    *,
    sentence: str,
    caveats: Sequence[str],
    figure: Image | None,
    findings: Sequence[Block],
) -> list[Block]:
    """Title, what ran, the warnings, the headline figure, the findings."""
    blocks: list[Block] = [Heading(f"Run report: {run.name}", 1), Paragraph(sentence)]
    blocks += caveat_blocks(caveats)
    if figure is not None:
        blocks.append(figure)
    blocks += findings
    return blocks
