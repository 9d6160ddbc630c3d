"""HeldRows and HeldLog: what is held is exactly the rows (events) not yet forgotten, numbered
as when they were appended, in memory that follows what is held."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from controller.meter.held import HeldLog, HeldRows

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("extend"), st.integers(0, 300)),
        st.tuples(st.just("forget"), st.integers(-5, 2000)),
    ),
    max_size=60,
)


@given(_OPS, st.integers(1, 64))
def test_held_rows_are_the_rows_not_forgotten_in_bounded_room(
    ops: list[tuple[str, int]], initial: int
) -> None:
    table = HeldRows(2, np.int64, initial_rows=initial)
    appended = 0
    first = 0
    most = 0
    for op, n in ops:
        if op == "extend":
            rows = np.arange(appended, appended + n, dtype=np.int64)
            table.extend(np.column_stack([rows, -rows]))
            appended += n
        else:
            table.forget_before(n)
            first = min(max(first, n), appended)
        most = max(most, appended - first)
        held = np.arange(first, appended)
        assert (table.first, table.appended, table.held) == (first, appended, appended - first)
        assert table.rows()[:, 0].tolist() == held.tolist()
        assert table.rows()[:, 1].tolist() == (-held).tolist()
        # Room for at most twice the most rows ever held at once (or the initial room).
        assert table.nbytes <= 16 * max(initial, 2 * most)


def test_held_rows_are_a_view_to_accumulate_into() -> None:
    table = HeldRows(1, np.float64)
    table.extend_zeros(4)
    table.forget_before(2)
    np.add.at(table.rows()[:, 0], [0, 0, 1], 1.5)
    table.extend_zeros(-3)  # nothing to add
    assert table.rows()[:, 0].tolist() == [3.0, 1.5]


@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("append"), st.integers(0, 5)),
            st.tuples(st.just("forget"), st.integers(0, 400)),
        ),
        max_size=80,
    ),
    st.integers(0, 100),
)
def test_held_log_forgets_a_leading_run_and_keeps_ordinals(
    ops: list[tuple[str, int]], since: int
) -> None:
    log: HeldLog[int] = HeldLog()
    events: list[int] = []  # every event ever appended, by ordinal: its sample index
    first = 0
    for op, n in ops:
        if op == "append":
            # Mostly in order; an event behind the last stays behind on purpose.
            events.append((events[-1] if events else 0) + n - 1)
            log.append(events[-1])
        else:
            log.forget_below(n, key=lambda index: index)
            while first < len(events) and events[first] < n:
                first += 1
        assert log.count == len(events)
        assert log.held == len(events) - first
        assert log.since(since) == events[max(since, first) :]
