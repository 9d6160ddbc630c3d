"""What a meter's store holds of a run that may last hours: rows appended in order, numbered
from 0 for the whole run, of which those no later read can need are forgotten.

`HeldRows` is a growable numpy table (samples, per-frame bookkeeping, averaged bins);
`HeldLog` a list of rare events (marker edges). Both keep numbering on after a release, so a
row's number, or an event's ordinal, is the same whenever it is asked: nothing a caller sees is
re-based. Memory follows what is held, not how long the run has been: a release frees the
front, and the next growth reuses that room (or, when little is free, allocates twice what is
held), so the capacity stays within twice the most rows ever held at once (or the initial room).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

__all__ = ["HeldLog", "HeldRows"]

_INITIAL_ROWS = 256
_T = TypeVar("_T")


class HeldRows:
    """Rows of `width` values of one dtype; row number n is `rows()[n - first]` while held."""

    def __init__(self, width: int, dtype: npt.DTypeLike, initial_rows: int = _INITIAL_ROWS) -> None:
        self._table: npt.NDArray[Any] = np.zeros((max(1, initial_rows), width), dtype=dtype)
        self._start = 0  # the first held row's place in `_table`
        self._first = 0  # its number
        self._held = 0

    @property
    def width(self) -> int:
        return int(self._table.shape[1])

    @property
    def first(self) -> int:
        """The number of the first row still held (every row below it is forgotten)."""
        return self._first

    @property
    def appended(self) -> int:
        """Rows ever appended: the next row's number."""
        return self._first + self._held

    @property
    def held(self) -> int:
        return self._held

    @property
    def nbytes(self) -> int:
        """The bytes the table takes, its unused room included."""
        return int(self._table.nbytes)

    def rows(self) -> npt.NDArray[Any]:
        """The held rows, a view: writing through it changes them."""
        return self._table[self._start : self._start + self._held]

    def extend(self, rows: npt.ArrayLike) -> None:
        """Append rows, shaped (n, width)."""
        new = np.asarray(rows, dtype=self._table.dtype).reshape(-1, self.width)
        self._room(len(new))
        end = self._start + self._held
        self._table[end : end + len(new)] = new
        self._held += len(new)

    def extend_zeros(self, count: int) -> None:
        """Append `count` rows of zeros (bins to accumulate into)."""
        self.extend(np.zeros((max(0, count), self.width), dtype=self._table.dtype))

    def forget_before(self, number: int) -> None:
        """Forget the rows numbered below `number` (beyond those appended: all of them)."""
        drop = min(max(0, number - self._first), self._held)
        self._start += drop
        self._first += drop
        self._held -= drop

    def _room(self, count: int) -> None:
        if self._start + self._held + count <= len(self._table):
            return
        needed = self._held + count
        if needed <= len(self._table) // 2:
            # Half the table free: move what is held to the front. Each move follows at least
            # as many appends as rows it moves, so appending stays linear.
            self._table[: self._held] = self._table[self._start : self._start + self._held]
        else:
            bigger = np.zeros((2 * needed, self.width), dtype=self._table.dtype)
            bigger[: self._held] = self._table[self._start : self._start + self._held]
            self._table = bigger
        self._start = 0


class HeldLog(Generic[_T]):
    """Events in arrival order, each with its ordinal (0 for the run's first), of which a
    leading run can be forgotten."""

    def __init__(self) -> None:
        self._items: list[_T] = []
        self._first = 0

    @property
    def count(self) -> int:
        """Events ever appended: the next one's ordinal."""
        return self._first + len(self._items)

    @property
    def held(self) -> int:
        return len(self._items)

    def append(self, item: _T) -> None:
        self._items.append(item)

    def since(self, ordinal: int) -> list[_T]:
        """The held events whose ordinal is `ordinal` or more."""
        return self._items[max(0, ordinal - self._first) :]

    def forget_below(self, index: int, key: Callable[[_T], int]) -> None:
        """Forget the leading events whose `key` (a sample index) is below `index`. Only a
        leading run: an event out of order is kept rather than taken for an old one."""
        drop = 0
        while drop < len(self._items) and key(self._items[drop]) < index:
            drop += 1
        del self._items[:drop]
        self._first += drop
