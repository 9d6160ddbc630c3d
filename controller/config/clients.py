"""Several client nodes (`nodes.clients`): how a trial's load is spread over them, and what a
config with more than one is refused for.

A workload's load is spread by dividing one of its parameters, the one its declaration names
(`WorkloadSpec.spread_param`): node i of K gets `total // K`, the first `total % K` nodes one
more, so the shares add up to the total exactly. A workload that names none cannot be divided
(the page is one unit): every client node runs the whole of it, and the load is K times one
node's.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.engines import engine_spec
from agent.workloads import ParamValue, spec_of
from controller.config.layers import Stack
from controller.config.model import Config
from controller.errors import ConfigError


def spread_param(kind: str) -> str | None:
    """The parameter of kind whose value is divided over the client nodes, if any."""
    return spec_of(kind).spread_param


def spread(total: int, nodes: int) -> tuple[int, ...]:
    """`total` divided over `nodes`: equal shares, the remainder one each to the first."""
    if nodes < 1:
        raise ValueError(f"{nodes} nodes: at least 1")
    base, extra = divmod(total, nodes)
    return tuple(base + (index < extra) for index in range(nodes))


def node_params(
    kind: str, params: Sequence[tuple[str, ParamValue]], nodes: int
) -> tuple[tuple[tuple[str, ParamValue], ...], ...]:
    """Each node's parameters: the kind's spread parameter divided, the rest the same."""
    name = spread_param(kind)
    given = dict(params)
    if name is None or name not in given:
        return tuple(tuple(params) for _ in range(nodes))
    shares = spread(int(given[name]), nodes)
    return tuple(
        tuple((key, share if key == name else value) for key, value in params) for share in shares
    )


def check_clients(stack: Stack, config: Config) -> None:
    """With two or more client nodes: SSH nodes only, named apart, no [link] shaping or device
    emulation (both are made for one client-server pair), and every value of the spread
    parameter at least one per node."""
    count = len(config.clients)
    if count < 2:
        return
    origin = stack.origin("nodes.clients")
    names: set[str] = set()
    for index, node in enumerate(config.clients):
        key = f"nodes.clients[{index}]"
        if node.is_local:
            raise ConfigError(
                f"{origin}: {key}.host: several client nodes must be SSH nodes (a local client "
                "is nodes.client alone)"
            )
        if node.device is not None:
            raise ConfigError(
                f"{origin}: {key}.device: device emulation is for one client node; unset it "
                "with several"
            )
        if node.name in names:
            raise ConfigError(f"{origin}: {key}.name: {node.name!r} names an earlier node too")
        names.add(str(node.name))
    if not engine_spec(config.server.engine).counts_by_header:
        raise ConfigError(
            f"{stack.origin('nodes.server.engine')}: nodes.server.engine: nghttpd's agent counts "
            "trials by one client's trial-control messages; with several client nodes use "
            '"h2"'
        )
    if config.link.is_shaped:
        raise ConfigError(
            f"{stack.origin('link')}: link: [link] shapes one client-server link; with "
            f"{count} client nodes (nodes.clients) shape each node's link yourself"
        )
    name = spread_param(config.workload.kind)
    if name is None:
        return
    swept = dict(config.sweep.axes).get(name)
    values = (
        [(f"sweep.{name}[{i}]", v) for i, v in enumerate(swept)]
        if swept is not None
        else [(f"workload.{name}", config.workload.param(name))]
    )
    for key, value in values:
        if int(value) < count:
            raise ConfigError(
                f"{stack.origin(key.split('[')[0])}: {key}: {value} {name} cannot be spread over "
                f"{count} client nodes (nodes.clients): each needs at least 1"
            )
