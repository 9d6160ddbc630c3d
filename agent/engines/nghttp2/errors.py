"""Errors of the nghttp2 engine, in the agent's exception tree."""

from __future__ import annotations

from agent.errors import AgentError, UsageError


class ToolMissingError(AgentError):
    """nghttp or nghttpd is not installed on this node; the message names the Debian package."""


class UnrepresentableWindowError(UsageError):
    """A window nghttp2 cannot express (it takes 2^N - 1 bytes), with mapping switched off."""


class UnsupportedSettingError(UsageError):
    """A SETTINGS value or option that nghttp / nghttpd has no command-line option for."""


class NghttpOutputError(AgentError):
    """nghttp's or nghttpd's output is not what this version of the agent can read."""
