"""Node failures, each a `DeviceError` whose one-line message starts with the node's label
(a deploy's, once the failure is one node's)."""

from __future__ import annotations

from collections.abc import Mapping

from controller.errors import ControllerError, DeviceError


class NodeError(DeviceError):
    """A node (local or over SSH) failed; the message names the node and what failed."""


class NodeUnreachableError(NodeError):
    """The node could not be reached, refused our key, or its connection broke."""


class HostKeyError(NodeUnreachableError):
    """The node's host key is unknown (without the first-contact flag) or does not match."""


class CommandFailedError(NodeError):
    """A command on the node exited with a non-zero status."""


class CommandTimeoutError(NodeError):
    """A command on the node ran past its timeout and was killed."""


class NodeGroupError(NodeError):
    """Some nodes of a fan-out failed; `results` keeps what the others returned."""

    def __init__(
        self, errors: Mapping[str, ControllerError], results: Mapping[str, object]
    ) -> None:
        self.errors = dict(errors)
        self.results = dict(results)
        super().__init__("; ".join(str(error) for error in self.errors.values()))


class DeployError(NodeError):
    """Building or downloading what a deploy ships failed. `label` names the node it was for
    once the failure is one node's (its platform's dependencies); the wheel, built once for
    every node, names none."""

    def __init__(self, message: str, *, label: str | None = None) -> None:
        super().__init__(message if label is None else f"{label}: {message}")
        self.label = label
