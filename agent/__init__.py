"""h2iot node agent: HTTP/2 page-fetch server and client with per-trial probes.

Deployable alone onto a node: imports only the standard library, h2/hyperframe/hpack and psutil.
"""

from agent._version import __version__

__all__ = ["__version__"]
