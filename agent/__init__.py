"""h2iot node agent: an HTTP/2 server and client running workloads (the page fetch, ...) with
per-trial probes.

Deployable alone onto a node: imports only the standard library, h2/hyperframe/hpack and psutil.
"""

from agent._version import __version__

__all__ = ["__version__"]
