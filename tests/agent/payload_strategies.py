"""Hypothesis strategies for the payload workload's datasets, shared by its tests."""

from __future__ import annotations

from array import array
from typing import Literal

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


# Values written over a window of a message: lengths and counts set huge (both byte orders), or
# every bit set, where a decoder would otherwise believe a claim.
_HUGE = (0xFFFFFFFF, 0x7FFFFFFF, 2**31, 0xFFFF, 0x8000, 2**62)


@st.composite
def _overwrite(draw: st.DrawFn, body: bytes) -> bytes:
    width = draw(st.sampled_from((1, 2, 4, 8)))
    value: int = draw(st.sampled_from(_HUGE)) % 2 ** (8 * width)
    order: Literal["big", "little"] = draw(st.sampled_from(("big", "little")))
    at = draw(st.integers(0, max(0, len(body) - width)))
    return body[:at] + value.to_bytes(width, order) + body[at + width :]


@st.composite
def _flip(draw: st.DrawFn, body: bytes) -> bytes:
    if not body:
        return body
    at = draw(st.integers(0, len(body) - 1))
    mask = draw(st.integers(1, 255))
    return body[:at] + bytes((body[at] ^ mask,)) + body[at + 1 :]


@st.composite
def _splice(draw: st.DrawFn, body: bytes) -> bytes:
    """Bytes cut out, put in, or a piece repeated (which nests what it opens)."""
    start = draw(st.integers(0, len(body)))
    end = draw(st.integers(start, min(len(body), start + 64)))
    kind = draw(st.sampled_from(("cut", "insert", "repeat")))
    if kind == "cut":
        return body[:start] + body[end:]
    if kind == "insert":
        return body[:start] + draw(st.binary(min_size=1, max_size=16)) + body[start:]
    return body[:start] + body[start:end] * draw(st.integers(2, 300)) + body[end:]


def damaged(body: bytes) -> st.SearchStrategy[bytes]:
    """`body` cut short, or with one to three changes: a bit flipped, a length field set huge,
    bytes cut, inserted or repeated."""
    change = st.sampled_from((_flip, _overwrite, _splice))

    @st.composite
    def apply(draw: st.DrawFn) -> bytes:
        if draw(st.booleans()):
            return body[: draw(st.integers(0, len(body)))]
        result = body
        for _ in range(draw(st.integers(1, 3))):
            result = draw(draw(change)(result))
        return result

    return apply()
