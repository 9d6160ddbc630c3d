"""HTTP/2 SETTINGS as the command line names them (`NAME=VALUE`), validated against RFC 9113.

Pure: parsing and range checks only. Names are accepted as `initial_window_size`,
`initial-window-size` or `SETTINGS_INITIAL_WINDOW_SIZE`, case-insensitively.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from h2.connection import H2Connection
from h2.settings import SettingCodes, Settings

from agent.errors import SettingsError
from agent.protocols.in_force import SettingsExchange

_U32_MAX = 2**32 - 1
# RFC 9113 section 6.5.2: a stream's window while SETTINGS_INITIAL_WINDOW_SIZE is not announced.
DEFAULT_INITIAL_WINDOW_SIZE = 65535


@dataclass(frozen=True)
class SettingSpec:
    name: str
    code: SettingCodes
    minimum: int
    maximum: int


# RFC 9113 section 6.5.2: the six defined settings and the values a peer may legally send.
SETTING_SPECS: Mapping[str, SettingSpec] = MappingProxyType(
    {
        spec.name: spec
        for spec in (
            SettingSpec("header_table_size", SettingCodes.HEADER_TABLE_SIZE, 0, _U32_MAX),
            SettingSpec("enable_push", SettingCodes.ENABLE_PUSH, 0, 1),
            SettingSpec("max_concurrent_streams", SettingCodes.MAX_CONCURRENT_STREAMS, 0, _U32_MAX),
            SettingSpec("initial_window_size", SettingCodes.INITIAL_WINDOW_SIZE, 0, 2**31 - 1),
            SettingSpec("max_frame_size", SettingCodes.MAX_FRAME_SIZE, 2**14, 2**24 - 1),
            SettingSpec("max_header_list_size", SettingCodes.MAX_HEADER_LIST_SIZE, 0, _U32_MAX),
        )
    }
)


def canonical_name(raw: str) -> str:
    """`SETTINGS_INITIAL_WINDOW_SIZE`, `initial-window-size` -> `initial_window_size`."""
    name = raw.strip().lower().replace("-", "_")
    name = name.removeprefix("settings_")
    if name not in SETTING_SPECS:
        known = ", ".join(SETTING_SPECS)
        raise SettingsError(f"unknown HTTP/2 setting {raw!r} (known: {known})")
    return name


def check_value(name: str, value: int) -> int:
    spec = SETTING_SPECS[name]
    if not spec.minimum <= value <= spec.maximum:
        raise SettingsError(
            f"setting {name}={value} is outside RFC 9113's range {spec.minimum}..{spec.maximum}"
        )
    return value


def parse_setting(text: str) -> tuple[str, int]:
    """Parse one `NAME=VALUE` (decimal or 0x-hex value) into a canonical name and checked value."""
    raw_name, sep, raw_value = text.partition("=")
    if not sep:
        raise SettingsError(f"setting {text!r} must look like NAME=VALUE")
    name = canonical_name(raw_name)
    try:
        value = int(raw_value.strip(), 0)
    except ValueError:
        raise SettingsError(f"setting {name} has a non-integer value {raw_value!r}") from None
    return name, check_value(name, value)


def parse_settings(texts: Iterable[str]) -> dict[str, int]:
    """Parse repeated `--setting NAME=VALUE` options; a later value for a name wins."""
    return dict(parse_setting(text) for text in texts)


def initial_window_size(settings: Mapping[str, int]) -> int:
    """The stream window these settings give a peer: their own entry, else the protocol's."""
    return settings.get("initial_window_size", DEFAULT_INITIAL_WINDOW_SIZE)


def to_h2(settings: Mapping[str, int]) -> dict[SettingCodes, int]:
    """Map canonical names to h2's setting codes."""
    return {SETTING_SPECS[name].code: value for name, value in settings.items()}


def from_h2(settings: Settings) -> dict[str, int]:
    """h2's settings (ours as the SETTINGS frame carries them, or the peer's) by lower-case name;
    the names are RFC 9113's and the extensions h2 knows (`enable_connect_protocol`)."""
    return {code.name.lower(): int(settings[code]) for code in SettingCodes if code in settings}


def protocol_key(name: str) -> str:
    """A setting's name as RFC 9113 writes it: `initial_window_size` ->
    `SETTINGS_INITIAL_WINDOW_SIZE`."""
    return f"SETTINGS_{name.upper()}"


# The study's setting -> what carries it in the client's and the server's SETTINGS
# (agent.protocols.in_force): over HTTP/2, the setting itself on both sides.
IN_FORCE_KEYS: Mapping[str, tuple[str, str]] = MappingProxyType(
    {
        name: (protocol_key(name), protocol_key(name))
        for name in (*SETTING_SPECS, "enable_connect_protocol")
    }
)


def by_protocol_name(settings: Settings) -> dict[str, int]:
    """h2's settings in force under RFC 9113's names; one h2 does not know (an extension a
    peer sent) by its identifier in hex."""
    named = {}
    for code in settings:
        try:
            name = protocol_key(SettingCodes(code).name.lower())
        except ValueError:
            name = f"0x{int(code):x}"
        named[name] = int(settings[code])
    return dict(sorted(named.items()))


def settings_exchange(connection: H2Connection, peer_settings_seen: bool) -> SettingsExchange:
    """What `connection` announced and, once the peer's SETTINGS frame has arrived
    (`peer_settings_seen`), what it received: h2's remote settings, the peer's values with
    RFC 9113's defaults for the ones it left out, as both sides hold them in force."""
    received = by_protocol_name(connection.remote_settings) if peer_settings_seen else None
    return SettingsExchange(by_protocol_name(connection.local_settings), received)
