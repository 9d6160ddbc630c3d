"""The stream workload's errors, in the agent's one tree: a peer that breaks a stream's framing,
sends an item that is not one, or asks for a subscription that cannot be served
(`StreamPeerError`, the outside world's), each naming the transport and what was wrong.

Every parser of a peer's bytes in this workload raises only its branch of this tree, whatever
the bytes: a handler turns it into a refusal (an HTTP status, a gRPC status, a WebSocket
close), a client into a failed trial with the reason."""

from __future__ import annotations

from agent.errors import PeerProtocolError


class StreamPeerError(PeerProtocolError):
    """The peer sent something the stream's protocol does not allow; the message names it."""


class ItemError(StreamPeerError):
    """An item that does not decode, or is not the item that was asked for."""


class SubscriptionError(StreamPeerError):
    """A subscription request the server will not serve: a param missing, malformed or out of
    range, or a Last-Event-ID that is none of the subscription's; `param` names it."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(f"{param}: {message}")
        self.param = param


class GrpcStatusError(StreamPeerError):
    """A gRPC call ended with a status other than OK (or a frame forced one); `code` is the
    gRPC status code (agent.workloads.stream.grpcwire.Status)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
