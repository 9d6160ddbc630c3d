"""Workload declarations, pure: every Param's check and parse over its whole domain (in range,
out of range, wrong types, choices, bools, the round trip from text), the registry, and the
`--param` parser's sides."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from agent.engines import DEFAULT_ENGINE, engines_where
from agent.errors import UsageError
from agent.workloads import SPECS, Field, Param, ParamError, WorkloadSpec, spec_of
from agent.workloads.params import ParamOptionError, parse_params

INT_PARAMS = [p for spec in SPECS.values() for p in spec.params if p.kind == "int"]
CHOICE_PARAMS = [p for spec in SPECS.values() for p in spec.params if p.kind == "choice"]
RATE = Param("rate_hz", "float", 1.0, "Hz", "publish rate", "server", 0.5, 1000.0)
FLAG = Param("compress", "bool", False, "", "compress bodies", "client")


def _ids(params: list[Param]) -> list[str]:
    return [p.name for p in params]


@pytest.mark.parametrize("param", INT_PARAMS, ids=_ids(INT_PARAMS))
@given(data=st.data())
def test_ints_in_range_are_themselves(param: Param, data: st.DataObject) -> None:
    assert param.minimum is not None and param.maximum is not None
    value = data.draw(st.integers(int(param.minimum), int(param.maximum)))
    assert param.check(value) == value
    assert type(param.check(value)) is int
    assert param.parse(str(value)) == value
    assert param.parse(f" {value:_} ") == value  # underscores and spaces, as Python reads them


@pytest.mark.parametrize("param", INT_PARAMS, ids=_ids(INT_PARAMS))
@given(data=st.data())
def test_ints_out_of_range_name_the_param(param: Param, data: st.DataObject) -> None:
    assert param.minimum is not None and param.maximum is not None
    value = data.draw(
        st.integers(max_value=int(param.minimum) - 1)
        | st.integers(min_value=int(param.maximum) + 1)
    )
    for attempt in (lambda: param.check(value), lambda: param.parse(str(value))):
        with pytest.raises(ParamError) as refused:
            attempt()
        assert refused.value.param == param.name
        assert str(refused.value) == f"{param.name}: {value} is outside {param.range_text()}"


@pytest.mark.parametrize("param", INT_PARAMS, ids=_ids(INT_PARAMS))
@pytest.mark.parametrize("value", [True, False, 1.0, "1", None, [1]])
def test_ints_refuse_other_types(param: Param, value: object) -> None:
    with pytest.raises(ParamError, match=f"^{param.name}: expected an integer"):
        param.check(value)


@pytest.mark.parametrize("param", INT_PARAMS, ids=_ids(INT_PARAMS))
@given(text=st.text(max_size=12))
def test_int_text_parses_or_names_the_param(param: Param, text: str) -> None:
    try:
        value = param.parse(text)
    except ParamError as exc:
        assert exc.param == param.name
    else:
        assert value == int(text.strip(), 10)


@pytest.mark.parametrize("param", CHOICE_PARAMS, ids=_ids(CHOICE_PARAMS))
def test_choices_are_themselves_and_nothing_else_is(param: Param) -> None:
    for choice in param.choices:
        assert param.check(choice) == choice
        assert param.parse(choice) == choice
    for other in ("", param.choices[0].swapcase(), f" {param.choices[0]}", 3, None, True):
        with pytest.raises(ParamError) as refused:
            param.check(other)
        assert refused.value.param == param.name
        assert "expected one of " + ", ".join(f'"{c}"' for c in param.choices) in str(refused.value)


@given(st.booleans())
def test_bools_round_trip(value: bool) -> None:
    assert FLAG.check(value) is value
    assert FLAG.parse(str(value)) is value
    assert FLAG.parse(str(value).upper()) is value


@pytest.mark.parametrize("value", [0, 1, "true", None, 1.0])
def test_bools_refuse_other_types(value: object) -> None:
    with pytest.raises(ParamError, match=r"^compress: expected true or false"):
        FLAG.check(value)


@pytest.mark.parametrize("text", ["", "maybe", "tru", "2"])
def test_bool_text_must_be_a_truth_value(text: str) -> None:
    with pytest.raises(ParamError, match=r"^compress: expected true or false"):
        FLAG.parse(text)


@given(st.floats(0.5, 1000.0))
def test_floats_in_range_round_trip(value: float) -> None:
    assert RATE.check(value) == value
    assert RATE.parse(repr(value)) == value


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_floats_out_of_range_or_not_finite_are_refused(value: float) -> None:
    assume(not 0.5 <= value <= 1000.0)
    with pytest.raises(ParamError) as refused:
        RATE.check(value)
    assert refused.value.param == "rate_hz"
    assert ("outside 0.5..1000" in str(refused.value)) or not math.isfinite(value)


def test_every_declared_default_passes_its_own_check() -> None:
    for spec in SPECS.values():
        assert spec.kind in SPECS and SPECS[spec.kind] is spec
        assert len(set(spec.param_names)) == len(spec.params)
        assert len({f.name for f in spec.fields}) == len(spec.fields)
        for param in spec.params:
            assert param.check(param.default) == param.default
        assert spec.defaults() == {p.name: p.default for p in spec.params}
        assert DEFAULT_ENGINE in engines_where(workload=spec.kind)


def test_spec_of_names_the_known_kinds() -> None:
    assert spec_of("blob") is SPECS["blob"]
    known = ", ".join(SPECS)
    assert known.startswith("page, blob")
    with pytest.raises(
        UsageError, match=f"unknown workload 'bulk' \\(known: {re.escape(known)}\\)$"
    ):
        spec_of("bulk")
    with pytest.raises(KeyError):
        SPECS["blob"].param("size")


def test_each_kind_is_declared_under_its_own_name() -> None:
    # spec_of imports one declaration by its registry entry; SPECS loads them all.
    for kind, spec in SPECS.items():
        assert spec.kind == kind
        assert spec_of(kind) is spec


def test_the_declared_spread_param_and_count_field_are_the_multi_client_facts() -> None:
    declared = {k: (s.spread_param, s.count_field) for k, s in SPECS.items() if s.spread_param}
    assert declared == {"blob": ("requests", "request_count"), "api": ("users", "requests")}
    assert SPECS["page"].spread_param is None and SPECS["page"].count_field is None


@pytest.mark.parametrize(
    ("facts", "message"),
    [
        ({"spread_param": "nope"}, "toy: spread_param 'nope' is no int parameter"),
        ({"spread_param": "mode"}, "toy: spread_param 'mode' is no int parameter"),
        ({"count_field": "nope"}, "toy: count_field 'nope' is no field"),
    ],
)
def test_a_declaration_naming_a_missing_param_or_field_is_refused_where_it_is_made(
    facts: dict[str, str], message: str
) -> None:
    params = (
        Param("size_bytes", "int", 10, "bytes", "a client param", "client", 0, 100),
        Param("mode", "choice", "a", "", "a choice", "client", choices=("a", "b")),
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        WorkloadSpec("toy", "a toy", params, (Field("count", "a count"),), **facts)


# --param, by side --------------------------------------------------------------------------

SIDES = WorkloadSpec(
    kind="sides",
    doc="one param of each side",
    params=(
        Param("size_bytes", "int", 10, "bytes", "a client param", "client", 0, 100),
        RATE,
        Param("seed", "int", 0, "", "a setup param", "setup", 0, 9),
    ),
    fields=(Field("count", "a count"),),
)


def test_params_of_the_side_are_filled_in_and_a_later_value_wins() -> None:
    assert parse_params(SIDES, [], "client") == {"size_bytes": 10}
    assert parse_params(SIDES, ["size_bytes=5", "size_bytes=1_0"], "client") == {"size_bytes": 10}
    assert parse_params(SIDES, ["rate_hz=2.5"], "server") == {"rate_hz": 2.5}


@pytest.mark.parametrize(
    ("texts", "side", "message"),
    [
        (["rate_hz=2"], "client", "--param rate_hz: a server parameter of sides, for serve; "),
        (["size_bytes=2"], "server", "--param size_bytes: a client parameter of sides, for trial"),
        (["seed=1"], "client", "--param seed: a setup parameter of sides, for no command"),
        (["bogus=1"], "client", "--param bogus: sides has no such parameter (its parameters: "),
        (["size_bytes=101"], "client", "--param size_bytes: 101 is outside 0..100"),
        (["size_bytes=ten"], "client", "--param size_bytes: expected an integer, got 'ten'"),
        (["size_bytes"], "client", "--param size_bytes: must look like NAME=VALUE"),
    ],
)
def test_param_options_are_refused_naming_the_param(
    texts: list[str], side: str, message: str
) -> None:
    with pytest.raises(ParamOptionError) as refused:
        parse_params(SIDES, texts, side)  # type: ignore[arg-type]
    assert str(refused.value).startswith(message)
    assert isinstance(refused.value, UsageError)
