"""What the agent's options mean for nghttp and nghttpd: their command lines, the SETTINGS they
announce, and the flow-control record. Pure.

nghttp announces MAX_CONCURRENT_STREAMS (default 100), INITIAL_WINDOW_SIZE, HEADER_TABLE_SIZE
when `-c` is given, and ENABLE_PUSH = 0 with `--no-push` (nghttp2 1.52's `populate_settings`).
nghttpd announces MAX_CONCURRENT_STREAMS (`-m`, default 100), HEADER_TABLE_SIZE (`-c`) and
INITIAL_WINDOW_SIZE (`-w`). Neither has an option for MAX_FRAME_SIZE or MAX_HEADER_LIST_SIZE:
asking for them is an UnsupportedSettingError, never silently dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from agent.engines import DEFAULT_ENGINE
from agent.engines.nghttp2.errors import UnsupportedSettingError
from agent.engines.nghttp2.spec import NGHTTP_SETTINGS, NGHTTPD_SETTINGS
from agent.engines.nghttp2.windows import WindowMapping, map_window
from agent.engines.spec import UnrepresentablePolicy
from agent.h2.settings import initial_window_size, protocol_key
from agent.trial_header import TRIAL_HEADER

NGHTTP_DEFAULT_MAX_CONCURRENT_STREAMS = 100
# The study's command: null output, all assets, statistics; no push, no dependency priorities.
STUDY_FLAGS = ("-n", "-a", "-s", "--no-dep")


def _check_supported(settings: Mapping[str, int], supported: tuple[str, ...], tool: str) -> None:
    for name in settings:
        if name not in supported:
            raise UnsupportedSettingError(
                f"setting {name}: {tool} has no option to announce it; use --engine "
                f"{DEFAULT_ENGINE} for it (nghttp2 engine: {', '.join(supported)})"
            )


@dataclass(frozen=True)
class NghttpOptions:
    """The client's choices: windows (mapped) and the other SETTINGS (canonical names)."""

    stream_window: WindowMapping
    connection_window: WindowMapping
    settings: dict[str, int] = field(default_factory=dict)

    @classmethod
    def create(
        cls, settings: Mapping[str, int], connection_window: int, policy: UnrepresentablePolicy
    ) -> NghttpOptions:
        """`settings`: what the client asks to announce; its stream window (the protocol's
        65535 when absent) becomes `-w`, the others their own options."""
        _check_supported(settings, NGHTTP_SETTINGS, "nghttp")
        # nghttp announces -w's window whether asked or not: it is kept apart from the settings
        # that have options only when given.
        others = {name: value for name, value in settings.items() if name != "initial_window_size"}
        return cls(
            map_window("initial_window_size", initial_window_size(settings), policy),
            map_window("--connection-window", connection_window, policy),
            others,
        )

    def argv(
        self,
        nghttp: str,
        url: str,
        trial_id: str,
        har_path: str,
        *,
        verbose: bool = False,
        headers: Sequence[tuple[str, str]] = (),
        data: str | None = None,
    ) -> list[str]:
        """`verbose`: its frame log too (-v), for the trial's event trace; `headers`: more
        request headers; `data`: a file whose bytes it POSTs."""
        argv = [nghttp, *STUDY_FLAGS, *(["-v"] if verbose else [])]
        if self.settings.get("enable_push", 0) == 0:
            argv.append("--no-push")
        argv += ["-w", str(self.stream_window.bits), "-W", str(self.connection_window.bits)]
        if "header_table_size" in self.settings:
            argv += ["-c", str(self.settings["header_table_size"])]
        if "max_concurrent_streams" in self.settings:
            argv += ["--max-concurrent-streams", str(self.settings["max_concurrent_streams"])]
        argv += ["-H", f"{TRIAL_HEADER}: {trial_id}"]
        for name, value in headers:
            argv += ["-H", f"{name}: {value}"]
        return [*argv, *([] if data is None else ["-d", data]), "-r", har_path, url]

    def announced(self) -> dict[str, int]:
        """The SETTINGS nghttp sends with these options."""
        announced = {
            "max_concurrent_streams": self.settings.get(
                "max_concurrent_streams", NGHTTP_DEFAULT_MAX_CONCURRENT_STREAMS
            ),
            "initial_window_size": self.stream_window.on_wire,
        }
        if "header_table_size" in self.settings:
            announced["header_table_size"] = self.settings["header_table_size"]
        if self.settings.get("enable_push", 0) == 0:
            announced["enable_push"] = 0
        return announced

    def settings_announced(self) -> dict[str, int]:
        """The same under RFC 9113's names, as the record's `settings_announced` keys them."""
        return {protocol_key(name): value for name, value in self.announced().items()}

    def flow_control(self) -> dict[str, object]:
        """The flow-control record: the windows nghttp used, and what was asked for."""
        stream, connection = self.stream_window, self.connection_window
        return {
            "initial_window_size": stream.on_wire,
            "connection_window": connection.on_wire,
            # nghttp2's automatic WINDOW_UPDATE: once half the window is consumed.
            "window_update_policy": "half",
            "initial_window_size_requested": stream.requested,
            "initial_window_size_on_wire": stream.on_wire,
            "initial_window_size_bits": stream.bits,
            "connection_window_requested": connection.requested,
            "connection_window_on_wire": connection.on_wire,
            "connection_window_bits": connection.bits,
            "mapped": not (stream.exact and connection.exact),
        }


@dataclass(frozen=True)
class NghttpdOptions:
    """The server's SETTINGS, as nghttpd options; its stream window mapped like the client's."""

    settings: dict[str, int]
    stream_window: WindowMapping | None

    @classmethod
    def create(cls, settings: Mapping[str, int], policy: UnrepresentablePolicy) -> NghttpdOptions:
        _check_supported(settings, NGHTTPD_SETTINGS, "nghttpd")
        window = settings.get("initial_window_size")
        mapping = None if window is None else map_window("initial_window_size", window, policy)
        return cls(dict(settings), mapping)

    def argv(
        self,
        nghttpd: str,
        root: str,
        host: str,
        port: int,
        tls: tuple[str, str] | None,
        *,
        verbose: bool = False,
    ) -> list[str]:
        """`verbose`: its frame log too (-v), for the trials' event traces."""
        argv = [nghttpd, "-a", host, "-d", root, *(["-v"] if verbose else [])]
        if self.stream_window is not None:
            argv += ["-w", str(self.stream_window.bits)]
        if "max_concurrent_streams" in self.settings:
            argv += ["-m", str(self.settings["max_concurrent_streams"])]
        if "header_table_size" in self.settings:
            argv += ["-c", str(self.settings["header_table_size"])]
        if tls is None:
            return [*argv, "--no-tls", str(port)]
        cert, key = tls
        return [*argv, str(port), key, cert]

    def announced(self) -> dict[str, int]:
        announced = {
            "max_concurrent_streams": self.settings.get(
                "max_concurrent_streams", NGHTTP_DEFAULT_MAX_CONCURRENT_STREAMS
            )
        }
        if "header_table_size" in self.settings:
            announced["header_table_size"] = self.settings["header_table_size"]
        if self.stream_window is not None:
            announced["initial_window_size"] = self.stream_window.on_wire
        return announced
