"""h2iot node agent: an HTTP/2 server and client running workloads (the page fetch, ...) with
per-trial probes.

Deployable alone onto a node: imports only the standard library and h2/hyperframe/hpack (its
probes read /proc), plus the pip extra of a workload that needs more (`WorkloadSpec.extra`).
"""

from agent._version import __version__

__all__ = ["__version__"]
