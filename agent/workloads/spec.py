"""What a workload declares: its parameters, the fields of its record, what it needs. Pure.

The controller reads these at config load (one range check per value, where it enters) and the
agent's command line parses `--param NAME=VALUE` with the same `Param`, so a value typed by hand
and one from a config file are held to the same rule.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from agent.errors import UsageError
from agent.protocols import protocols_where

ParamKind = Literal["int", "float", "choice", "bool"]
# client: passed to the client verb each trial; server: passed to `serve` (a change restarts the
# server); setup: the controller prepares the node with it (the page workload's site build).
ParamSide = Literal["client", "server", "setup"]
ParamValue = int | float | str | bool

_TRUE, _FALSE = ("true", "yes", "1"), ("false", "no", "0")


class ParamError(UsageError):
    """A workload parameter's name or value is wrong; `param` names it."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(f"{param}: {message}")
        self.param = param
        self.reason = message


def _shown(value: object) -> str:
    return json.dumps(value) if isinstance(value, str | bool) else repr(value)


@dataclass(frozen=True)
class Param:
    name: str
    kind: ParamKind
    default: ParamValue
    unit: str
    doc: str
    side: ParamSide = "client"
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()

    def check(self, value: object) -> ParamValue:
        """A typed value (from TOML or JSON) as its canonical form; ParamError otherwise."""
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise ParamError(self.name, f"expected true or false, got {_shown(value)}")
            return value
        if self.kind == "choice":
            if not isinstance(value, str) or value not in self.choices:
                listed = ", ".join(json.dumps(choice) for choice in self.choices)
                raise ParamError(self.name, f"expected one of {listed}, got {_shown(value)}")
            return value
        number: int | float
        if self.kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise ParamError(self.name, f"expected an integer, got {_shown(value)}")
            number = value
        else:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ParamError(self.name, f"expected a number, got {_shown(value)}")
            number = float(value)
            if not math.isfinite(number):
                raise ParamError(self.name, f"{value!r} is not a finite number")
        if (self.minimum is not None and number < self.minimum) or (
            self.maximum is not None and number > self.maximum
        ):
            raise ParamError(self.name, f"{value} is outside {self.range_text()}")
        return number

    def parse(self, text: str) -> ParamValue:
        """A command-line string as `check` takes it: decimal numbers (underscores allowed),
        true/false, or one of the choices."""
        if self.kind == "int":
            try:
                return self.check(int(text.strip(), 10))
            except ValueError:
                raise ParamError(self.name, f"expected an integer, got {text!r}") from None
        if self.kind == "float":
            try:
                return self.check(float(text.strip()))
            except ValueError:
                raise ParamError(self.name, f"expected a number, got {text!r}") from None
        if self.kind == "bool":
            lowered = text.strip().lower()
            if lowered in _TRUE or lowered in _FALSE:
                return lowered in _TRUE
            raise ParamError(self.name, f"expected true or false, got {text!r}")
        return self.check(text)

    def range_text(self) -> str:
        """The allowed values in words, for errors and the documentation."""
        if self.kind == "choice":
            return ", ".join(json.dumps(choice) for choice in self.choices)
        if self.kind == "bool":
            return "true, false"

        def bound(value: float | None) -> str:
            if value is None:
                return ""
            return str(int(value)) if self.kind == "int" else f"{value:g}"

        return f"{bound(self.minimum)}..{bound(self.maximum)}"


@dataclass(frozen=True)
class Field:
    """One of a workload's own figures in its trial record's `metrics` (units in the name)."""

    name: str
    doc: str


@dataclass(frozen=True)
class Refusal:
    """A value of one of a workload's params that some protocols cannot run: refused at load
    and by the agent's command line, with `reason`."""

    param: str
    value: ParamValue
    protocols: tuple[str, ...]
    reason: str

    def message(self, protocol: str) -> str:
        return f"{self.param} = {_shown(self.value)} does not run over {protocol}: {self.reason}"


@dataclass(frozen=True)
class WorkloadSpec:
    kind: str
    doc: str
    params: tuple[Param, ...]
    fields: tuple[Field, ...]
    # The protocols (agent.protocols) its client and server run over: those over TCP (HTTP/2)
    # unless it says more, since over QUIC the agent's HTTP/3 must carry every request it makes.
    # Which engines run it is each engine's to say (agent.engines).
    protocols: tuple[str, ...] = field(default_factory=lambda: protocols_where(quic=False))
    extra: str | None = None  # the pip extra holding its libraries; None: the agent's core deps
    # The parameter divided over several client nodes (node i of K gets total // K, the first
    # total % K one more); None: the workload is one unit, each node runs the whole of it.
    spread_param: str | None = None
    # The field counting what its `*_mean_*` and percentile fields are taken over, which weighs
    # them when several client nodes' records merge into one; None: nothing to weigh.
    count_field: str | None = None
    # Its two parts of a trial's exchange phase, split at the first response's headers (the
    # record's `first_byte` mark): the controller adds `<kind>_<part>_s` and
    # `<kind>_energy_<part>_mj` for each; None: the exchange is one piece.
    exchange_split: tuple[str, str] | None = None
    # Param values some of its protocols cannot run (`refusal`).
    refusals: tuple[Refusal, ...] = ()
    # Its client record lists its exchanges with their marks (`exchanges`, on the phases'
    # clock): the controller splits the trial's energy per exchange (controller.sweep.exchanges,
    # analysis.trial_columns' EXCHANGE_ENERGY_FIELDS).
    exchange_marks: bool = False
    # Its params that schedule a trial's work over time, by name: (count, interval_s,
    # jitter_s), `count` exchanges `interval_s` apart, each moved by up to `jitter_s` (the
    # periodic workload). A trial timeout its schedule outlasts would fail every trial, so the
    # controller refuses it at load (`schedule_s`). None: the workload runs as fast as it can.
    schedule: tuple[str, str, str] | None = None

    def __post_init__(self) -> None:
        # A declaration's own mistake, caught where the workload is defined, not mid-sweep.
        if self.spread_param is not None and (
            self.spread_param not in self.param_names or self.param(self.spread_param).kind != "int"
        ):
            raise ValueError(f"{self.kind}: spread_param {self.spread_param!r} is no int parameter")
        if self.count_field is not None and self.count_field not in {f.name for f in self.fields}:
            raise ValueError(f"{self.kind}: count_field {self.count_field!r} is no field")

    def runs_protocol(self, protocol: str) -> bool:
        return protocol in self.protocols

    def refusal(self, params: Mapping[str, object], protocol: str) -> Refusal | None:
        """The declared refusal of `params` over `protocol` (its `message` says why in one
        line); None if they run."""
        for refusal in self.refusals:
            if protocol in refusal.protocols and params.get(refusal.param) == refusal.value:
                return refusal
        return None

    def schedule_s(self, params: Mapping[str, object]) -> float:
        """How long after its start a trial with `params` may still be starting its work (its
        last exchange, at the latest); 0 for a workload without a `schedule`."""
        if self.schedule is None:
            return 0.0
        count, interval_s, jitter_s = (float(str(params[name])) for name in self.schedule)
        return (count - 1) * interval_s + jitter_s

    def param(self, name: str) -> Param:
        for param in self.params:
            if param.name == name:
                return param
        raise KeyError(name)

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(param.name for param in self.params)

    def defaults(self) -> dict[str, ParamValue]:
        return {param.name: param.default for param in self.params}


VERIFY_PARAM = Param(
    "verify",
    "choice",
    "sha256",
    "",
    "how each body is checked: its size and sha256, or its size alone (as `nghttp -nas`, the "
    "study's client; about 0.6 ms less client CPU per MB fetched)",
    choices=("sha256", "size"),
)
"""The body check of the workloads that GET known bodies (page, blob): the h2 engine's
client; nghttp2's tools check sizes only whatever it says."""


def hashes_bodies(params: Mapping[str, object]) -> bool:
    """Whether a trial with `params` checks bodies by sha256 (VERIFY_PARAM)."""
    return params.get(VERIFY_PARAM.name, VERIFY_PARAM.default) == "sha256"
