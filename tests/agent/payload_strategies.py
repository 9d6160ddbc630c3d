"""Hypothesis strategies for the payload workload's datasets, shared by its tests."""

from __future__ import annotations

from array import array

from hypothesis import strategies as st

from agent.workloads.payload.dataset import INT32_MAX, INT32_MIN, Dataset, Matrix, Record, Structs

# Characters XML 1.0 can carry (no C0 controls but tab, newline, carriage return; no surrogates
# or U+FFFE/U+FFFF), so a text survives every encoding, SOAP's included.
XML_TEXT = st.text(
    st.characters(
        blacklist_categories=("Cs",),
        blacklist_characters="".join(chr(c) for c in range(32) if c not in (9, 10, 13))
        + "\ufffe\uffff",
    ),
    max_size=12,
)


@st.composite
def matrices(draw: st.DrawFn, finite: bool = True, max_side: int = 6) -> Matrix:
    side = draw(st.integers(0, max_side))
    values = draw(
        st.lists(
            st.floats(allow_nan=not finite, allow_infinity=not finite, width=64),
            min_size=side * side,
            max_size=side * side,
        )
    )
    return Matrix(side, array("d", values))


def structs(text: st.SearchStrategy[str] = XML_TEXT) -> st.SearchStrategy[Structs]:
    record = st.builds(Record, text, st.integers(INT32_MIN, INT32_MAX), st.booleans())
    return st.lists(record, max_size=8).map(lambda records: Structs(tuple(records)))


def datasets(finite: bool = True) -> st.SearchStrategy[Dataset]:
    return st.one_of(matrices(finite), structs())
