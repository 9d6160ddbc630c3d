"""`--param NAME=VALUE` options, parsed for one command with the workload's own `Param`s: the
one range check of a hand-typed value, where it enters. Pure."""

from __future__ import annotations

from collections.abc import Iterable

from agent.workloads.spec import ParamError, ParamSide, ParamValue, WorkloadSpec

# Which command takes which side's params; setup params are the controller's (the page's site).
_TAKEN_BY: dict[ParamSide, str] = {"client": "trial", "server": "serve", "setup": "no command"}


class ParamOptionError(ParamError):
    """A `--param` option is wrong; the message names the option and the param."""

    def __str__(self) -> str:
        return f"--param {super().__str__()}"


def parse_params(
    spec: WorkloadSpec, texts: Iterable[str], side: ParamSide
) -> dict[str, ParamValue]:
    """The params of `side` with the given values, the others at their defaults, canonical. A
    later value for a name wins."""
    values = {param.name: param.default for param in spec.params if param.side == side}
    for text in texts:
        name, sep, raw = text.partition("=")
        name = name.strip()
        if not sep:
            raise ParamOptionError(text, "must look like NAME=VALUE")
        try:
            param = spec.param(name)
        except KeyError:
            known = ", ".join(spec.param_names) or "none"
            raise ParamOptionError(
                name, f"{spec.kind} has no such parameter (its parameters: {known})"
            ) from None
        if param.side != side:
            ours = ", ".join(p.name for p in spec.params if p.side == side) or "none"
            raise ParamOptionError(
                name,
                f"a {param.side} parameter of {spec.kind}, for {_TAKEN_BY[param.side]}; "
                f"this command takes its {side} parameters ({ours})",
            )
        try:
            values[name] = param.parse(raw)
        except ParamError as exc:
            raise ParamOptionError(exc.param, exc.reason) from None
    return values
