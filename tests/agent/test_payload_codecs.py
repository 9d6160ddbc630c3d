"""The payload workload's six encodings as pure functions: every dataset round-trips to the same
values (its packed form, so float bits count), in every encoding; what an encoding cannot carry
is refused when writing. Whatever bytes arrive, a decoder answers a dataset or a DecodeError:
tests/agent/test_payload_fuzz.py."""

from __future__ import annotations

import math
from array import array

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.workloads.payload.codecs import BY_MEDIA_TYPE, ENCODINGS, dime, envelope, media_type
from agent.workloads.payload.dataset import (
    Dataset,
    Matrix,
    Record,
    Structs,
    digest,
    make_dataset,
    pack,
    unpack,
)
from agent.workloads.payload.errors import DecodeError, EncodeError
from agent.workloads.payload.spec import ENCODING_NAMES
from tests.agent.payload_strategies import datasets, matrices, structs

NAMES = sorted(ENCODINGS)
# Encodings whose floats travel as their 8 bytes: NaN payloads and -0.0 survive bit for bit.
# (cbor2 writes every NaN as CBOR's canonical half-precision NaN: values, not bits.)
BINARY_FLOATS = ("swa", "dime", "raw")


def round_trip(name: str, dataset: Dataset) -> Dataset:
    encoding = ENCODINGS[name]
    content_type, body = encoding.encode(dataset)
    assert BY_MEDIA_TYPE[media_type(content_type)] is encoding
    return encoding.decode(content_type, body)


def test_registry_matches_the_spec() -> None:
    assert set(ENCODINGS) == set(ENCODING_NAMES)
    assert len(BY_MEDIA_TYPE) == len(ENCODINGS)


@pytest.mark.parametrize("name", NAMES)
@given(dataset=datasets())
@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
def test_every_dataset_round_trips(name: str, dataset: Dataset) -> None:
    assert pack(round_trip(name, dataset)) == pack(dataset)


@pytest.mark.parametrize("name", BINARY_FLOATS)
@given(matrix=matrices(finite=False))
def test_binary_encodings_keep_every_float_bit(name: str, matrix: Matrix) -> None:
    back = round_trip(name, matrix)
    assert isinstance(back, Matrix)
    assert back.values.tobytes() == matrix.values.tobytes()


@pytest.mark.parametrize("name", ["soap", "cbor"])
@given(matrix=matrices(finite=False))
def test_non_finite_doubles_keep_their_value(name: str, matrix: Matrix) -> None:
    back = round_trip(name, matrix)
    assert isinstance(back, Matrix)
    for got, sent in zip(back.values, matrix.values, strict=True):
        assert got == sent or (math.isnan(got) and math.isnan(sent))
        assert math.isnan(sent) or math.copysign(1.0, got) == math.copysign(1.0, sent)


def test_soap_uses_xsd_lexical_forms() -> None:
    body = envelope.write_inline(Matrix(2, array("d", [math.inf, -math.inf, math.nan, -0.0])))
    assert b"<item>INF</item><item>-INF</item><item>NaN</item><item>-0.0</item>" in body


@pytest.mark.parametrize("name", ["swa", "dime", "raw", "json", "cbor"])
@given(dataset=structs(st.text(st.characters(blacklist_categories=("Cs",)), max_size=10)))
def test_any_unicode_text_round_trips_outside_xml(name: str, dataset: Structs) -> None:
    assert round_trip(name, dataset) == dataset


@pytest.mark.parametrize("text", ["\x00", "a\x1fb", "\ufffe"])
def test_soap_refuses_text_xml_cannot_carry(text: str) -> None:
    with pytest.raises(EncodeError, match=r"XML 1\.0 cannot carry"):
        ENCODINGS["soap"].encode(Structs((Record(text, 1, True),)))


def test_carriage_returns_survive_xml() -> None:
    dataset = Structs((Record("a\rb\r\nc <&> ]]>", -5, False),))
    assert round_trip("soap", dataset) == dataset


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_json_refuses_non_finite_numbers(value: float) -> None:
    with pytest.raises(EncodeError, match="JSON"):
        ENCODINGS["json"].encode(Matrix(1, array("d", [value])))


@pytest.mark.parametrize("name", NAMES)
def test_generated_datasets_round_trip(name: str) -> None:
    for dataset in (make_dataset("matrix", 16, 3), make_dataset("structs", 50, 3)):
        assert digest(round_trip(name, dataset)) == digest(dataset)


def test_datasets_are_deterministic_and_differ_by_seed() -> None:
    assert digest(make_dataset("matrix", 8, 1)) == digest(make_dataset("matrix", 8, 1))
    assert digest(make_dataset("matrix", 8, 1)) != digest(make_dataset("matrix", 8, 2))
    structs_ = make_dataset("structs", 7, 0)
    assert isinstance(structs_, Structs) and len(structs_.records) == 7


def test_sizes_keep_the_expected_order() -> None:
    """For a matrix, text is the largest and the packed bytes the smallest; the attachment forms
    add only their framing."""
    matrix = make_dataset("matrix", 32, 0)
    size = {name: len(ENCODINGS[name].encode(matrix)[1]) for name in NAMES}
    assert size["raw"] < size["dime"] < size["swa"] < size["cbor"] < size["json"] < size["soap"]
    assert size["dime"] - size["raw"] < 1000


@given(dataset=datasets())
def test_packed_form_round_trips_and_refuses_every_truncation(dataset: Dataset) -> None:
    packed = pack(dataset)
    assert pack(unpack(packed, "test")) == packed
    for cut in range(len(packed)):
        with pytest.raises(DecodeError, match="test"):
            unpack(packed[:cut], "test")
    with pytest.raises(DecodeError):
        unpack(packed + b"\x00", "test")


@given(dataset=datasets(), chunk=st.integers(0, 40))
def test_dime_round_trips_at_any_chunk_size(dataset: Dataset, chunk: int) -> None:
    content_type, body = dime.encode(dataset, chunk_bytes=chunk)
    assert pack(dime.decode(content_type, body)) == pack(dataset)
    records = dime.read_records(body)
    data_bytes = len(pack(dataset))
    expected = 1 if chunk == 0 or data_bytes <= chunk else -(-data_bytes // chunk)
    assert len(records) == 1 + expected
    assert [r.chunked for r in records[1:]] == [True] * (expected - 1) + [False]
    assert len(body) % 4 == 0
