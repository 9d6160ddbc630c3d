"""The page workload's declaration."""

from agent.protocols import PROTOCOLS
from agent.site.limits import DEFAULT_TOTAL_BYTES, MAX_TOTAL_BYTES, MIN_TOTAL_BYTES
from agent.workloads.spec import VERIFY_PARAM, Field, Param, WorkloadSpec

PAGE = WorkloadSpec(
    protocols=PROTOCOLS,  # its client and server run over HTTP/3 too
    kind="page",
    doc="fetch the test page and its 7 subresources on a new connection, every body verified",
    params=(
        Param(
            "site_seed", "int", 0, "", "seed of the deterministic test page", "setup", 0, 2**63 - 1
        ),
        Param(
            "total_bytes",
            "int",
            DEFAULT_TOTAL_BYTES,
            "bytes",
            "size of the page with all its files",
            "setup",
            MIN_TOTAL_BYTES,
            MAX_TOTAL_BYTES,
        ),
        VERIFY_PARAM,
    ),
    fields=(
        Field("resource_count", "resources fetched and verified (the page and its subresources)"),
        Field("body_bytes", "response body bytes received, bytes"),
    ),
    # The page's own head (its request's round trip and the server's answer) against its
    # bodies' transfer.
    exchange_split=("first_byte", "transfer"),
)
