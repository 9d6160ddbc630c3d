"""The payload workload's exceptions: one tree under the agent's."""

from __future__ import annotations

from agent.errors import AgentError


class PayloadError(AgentError):
    """Anything the payload workload refuses."""


class DecodeError(PayloadError):
    """A message body is not a valid dataset in its encoding; the message says where."""


class EncodeError(PayloadError):
    """A dataset cannot be written in an encoding (an XML-illegal character, a number out of
    range)."""
