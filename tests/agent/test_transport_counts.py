"""A trial's QUIC transport counts over its connections (agent.transport_counts), pure."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent.transport_counts import LARGEST, SUMMED, merged

_count = st.none() | st.integers(0, 10**6)
_record = st.fixed_dictionaries(
    {
        "protocol": st.just("h3"),
        "smoothed_rtt_s": st.floats(0, 1),
        **{name: _count for name in (*SUMMED, *LARGEST)},
    }
)


@given(st.lists(_record, min_size=1, max_size=6))
def test_counts_add_up_over_the_connections_and_the_rest_is_the_latest(
    records: list[dict[str, object]],
) -> None:
    total: dict[str, object] | None = None
    for record in records:
        total = merged(total, record)
    assert total is not None and total["connections"] == len(records)
    for name in SUMMED:
        counts = [r[name] for r in records]
        unknown = any(c is None for c in counts)
        assert total[name] == (None if unknown else sum(c for c in counts if isinstance(c, int)))
    for name in LARGEST:
        present = [c for r in records if isinstance(c := r[name], int)]
        assert total[name] == (max(present) if present else None)
    assert total["smoothed_rtt_s"] == records[-1]["smoothed_rtt_s"]


def test_http2_has_no_transport_record_to_merge() -> None:
    assert merged(None, None) is None
    assert merged({"packets_lost": 1, "connections": 1}, None) == {
        "packets_lost": 1,
        "connections": 1,
    }
