"""The stream workload's errors, in the agent's one tree: a peer that breaks a stream's framing
or sends an item that is not one (`StreamPeerError`, the outside world's), each naming the
transport and what was wrong."""

from __future__ import annotations

from agent.errors import PeerProtocolError


class StreamPeerError(PeerProtocolError):
    """The peer sent something the stream's protocol does not allow; the message names it."""


class ItemError(StreamPeerError):
    """An item that does not decode, or is not the item that was asked for."""


class GrpcStatusError(StreamPeerError):
    """A gRPC call ended with a status other than OK (or a frame forced one); `code` is the
    gRPC status code (agent.workloads.stream.grpcwire.Status)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
