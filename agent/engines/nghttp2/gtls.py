"""The engine's HTTP/3 side: ngtcp2's example client and server (`gtlsclient`, `gtlsserver`;
Debian ngtcp2-client and ngtcp2-server, GnuTLS), the nghttp2 project's QUIC sibling and the C
anchor beside the agent's qh3. Pure: their options from the trial's.

Windows are exact bytes (no 2^N - 1 here) and fixed: ngtcp2's examples grow a window to about
1 MB unless `--max-window=0 --max-stream-window=0`. The stream window is the receiver's
initial_max_stream_data (bidi local for the client's own requests, bidi remote for the
server's), the connection window initial_max_data. Neither tool parses HTML nor sends our trial
header: the client is given the page's URLs from the site manifest, and the server's agent
counts trials by trial-control messages, as nghttpd's does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent.engines.nghttp2.spec import NGTCP2_SETTINGS
from agent.errors import UsageError
from agent.h3.settings import datagram_bytes_of

_UNBOUNDED_S = "3600s"  # gtlsclient's own idle timeout: the agent's trial timeout governs


@dataclass(frozen=True)
class GtlsOptions:
    stream_window_bytes: int
    connection_window_bytes: int
    datagram_bytes: int

    @classmethod
    def create(
        cls, settings: dict[str, int], connection_window: int | None, datagram_bytes: int | None
    ) -> GtlsOptions:
        """`datagram_bytes` as agent.h3.settings.datagram_bytes_of takes it (None: the
        default), so both engines' HTTP/3 send the same datagrams."""
        unknown = [name for name in settings if name not in NGTCP2_SETTINGS]
        if unknown:
            raise UsageError(
                f"setting {unknown[0]}: ngtcp2's tools announce only initial_window_size "
                "over HTTP/3"
            )
        window = settings.get("initial_window_size", 65535)
        return cls(
            window,
            window if connection_window is None else connection_window,
            datagram_bytes_of(datagram_bytes),
        )

    def window_args(self) -> list[str]:
        return [
            f"--max-stream-data-bidi-local={self.stream_window_bytes}",
            f"--max-stream-data-bidi-remote={self.stream_window_bytes}",
            f"--max-data={self.connection_window_bytes}",
            "--max-window=0",
            "--max-stream-window=0",
            f"--max-udp-payload-size={self.datagram_bytes}",
        ]

    def client_argv(
        self,
        tool: str,
        host: str,
        port: int,
        urls: Sequence[str],
        download: str,
        *,
        qlog_file: str | None = None,
        verbose: bool = False,
        session: tuple[str, str] | None = None,
        data: str | None = None,
    ) -> list[str]:
        """One connection fetching every URL at once, each body saved under `download`; with
        `qlog_file`, ngtcp2's own qlog of the connection written there; `verbose`: its log
        (agent.engines.nghttp2.gtls_log) instead of `-q`; `session`: the TLS session and
        transport-parameter files it resumes from and saves to, for 0-RTT; `data`: a file
        whose bytes it POSTs."""
        resume = (
            [] if session is None else [f"--session-file={session[0]}", f"--tp-file={session[1]}"]
        )
        return [
            tool,
            *([] if verbose else ["-q"]),
            *([] if qlog_file is None else [f"--qlog-file={qlog_file}"]),
            *resume,
            *([] if data is None else ["-m", "POST", f"--data={data}"]),
            "--exit-on-all-streams-close",
            "--no-pmtud",
            f"--timeout={_UNBOUNDED_S}",
            *self.window_args(),
            f"--download={download}",
            host,
            str(port),
            *urls,
        ]

    def server_argv(
        self,
        tool: str,
        root: str,
        host: str,
        port: int,
        tls: tuple[str, str],
        *,
        qlog_dir: str | None = None,
    ) -> list[str]:
        """With `qlog_dir`, ngtcp2's own qlog of each connection written there, a file each."""
        cert, key = tls
        qlog = [] if qlog_dir is None else [f"--qlog-dir={qlog_dir}"]
        return [tool, "-q", *qlog, "-d", root, *self.window_args(), host, str(port), key, cert]

    def announced(self) -> dict[str, int]:
        return {"initial_window_size": self.stream_window_bytes}

    def settings_announced(self) -> dict[str, int]:
        """The transport parameters `window_args` sets, by RFC 9000's names."""
        return {
            "initial_max_data": self.connection_window_bytes,
            "initial_max_stream_data_bidi_local": self.stream_window_bytes,
            "initial_max_stream_data_bidi_remote": self.stream_window_bytes,
            "max_udp_payload_size": self.datagram_bytes,
        }
