"""A page fetch: connect, GET the page, then its subresources concurrently (bounded by the
server's MAX_CONCURRENT_STREAMS, as a browser and `nghttp -a` do), each body checked against the
site manifest, with the process's CPU, memory and frames measured over exactly that span."""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from agent import __version__, probe
from agent.client.connection import ClientConnection, Response
from agent.client.options import TrialOptions
from agent.client.record import FetchRecord, ResourceTiming
from agent.errors import AgentError, BodyMismatchError, FetchError, UsageError
from agent.html_links import subresource_paths
from agent.marker import Marker
from agent.site.manifest import MANIFEST_NAME, SiteManifest, parse_manifest
from agent.trial_header import TRIAL_HEADER


@dataclass(frozen=True)
class Target:
    url: str
    scheme: str
    host: str
    port: int
    path: str

    @property
    def authority(self) -> str:
        return f"{self.host}:{self.port}"

    @classmethod
    def parse(cls, url: str) -> Target:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"URL {url!r} must be http://HOST:PORT/PATH or https://...")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(url, parts.scheme, parts.hostname, port, parts.path or "/")


def client_tls_context(options: TrialOptions) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=options.ca_file)
    if options.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    return context


async def open_connection(target: Target, options: TrialOptions) -> ClientConnection:
    loop = asyncio.get_running_loop()
    context = client_tls_context(options) if target.scheme == "https" else None
    try:
        transport, connection = await loop.create_connection(
            lambda: ClientConnection(options.settings, options.flow),
            target.host,
            target.port,
            ssl=context,
        )
    except OSError as exc:
        raise FetchError(f"cannot connect to {target.authority}: {exc.strerror or exc}") from None
    if (
        context is not None
        and transport.get_extra_info("ssl_object").selected_alpn_protocol() != "h2"
    ):
        transport.close()
        raise FetchError(f"{target.authority} did not negotiate h2 with ALPN")
    return connection


async def download_manifest(target: Target, options: TrialOptions) -> SiteManifest:
    """The site's manifest from the server itself, outside any timed trial."""
    connection = await open_connection(target, options)
    try:
        path = target.path.rsplit("/", 1)[0] + "/" + MANIFEST_NAME
        response = await asyncio.wait_for(
            connection.request(target.authority, target.scheme, path, [], keep_body=True),
            options.timeout_s,
        )
    finally:
        await connection.close()
    if response.status != 200 or response.body is None:
        raise FetchError(f"{target.url}: GET {path} answered {response.status}; pass --manifest")
    return parse_manifest(bytes(response.body).decode("utf-8"), source=f"{target.url}{path}")


class PageFetch:
    """One page fetch on a connection of its own; `run` returns its record, failed or not."""

    def __init__(
        self,
        target: Target,
        *,
        manifest: SiteManifest,
        options: TrialOptions,
        trial_id: str,
        repetition: int,
        marker: Marker,
    ) -> None:
        self.target = target
        self.manifest = manifest
        self.files = manifest.by_path()
        self.options = options
        self.trial_id = trial_id
        self.repetition = repetition
        self.marker = marker
        self._extra = [(TRIAL_HEADER.encode(), trial_id.encode())]
        self._responses: list[Response] = []
        self._verified: set[str] = set()

    async def run(self) -> FetchRecord:
        connection: ClientConnection | None = None
        error: str | None = None
        self.marker.raise_line()
        window = probe.ProbeWindow()
        try:
            connection = await open_connection(self.target, self.options)
            await asyncio.wait_for(self._fetch_page(connection), self.options.timeout_s)
        except TimeoutError:
            error = f"timeout: page fetch took longer than {self.options.timeout_s:g} s"
        except AgentError as exc:
            error = str(exc)
        span = window.close()
        self.marker.lower_line()
        if connection is not None:
            await connection.close()
        return self._record(connection, span, window.overhead_s, error)

    async def _fetch_page(self, connection: ClientConnection) -> None:
        index = await self._get(connection, self.target.path, keep_body=True)
        assert index.body is not None
        html = bytes(index.body).decode("utf-8", errors="replace")
        paths = subresource_paths(html, self.target.path)
        await connection.settings_received()
        limit = max(1, connection.peer_max_concurrent_streams)
        queue = list(reversed(paths))
        running: set[asyncio.Future[Response]] = set()
        while queue or running:
            while queue and len(running) < limit:
                running.add(self._start(connection, queue.pop()))
            done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for future in done:
                self._check(future.result())

    def _start(self, connection: ClientConnection, path: str) -> asyncio.Future[Response]:
        future = connection.request(self.target.authority, self.target.scheme, path, self._extra)
        return future

    async def _get(self, connection: ClientConnection, path: str, keep_body: bool) -> Response:
        response = await connection.request(
            self.target.authority, self.target.scheme, path, self._extra, keep_body=keep_body
        )
        self._check(response)
        return response

    def _check(self, response: Response) -> None:
        self._responses.append(response)
        if response.status != 200:
            raise FetchError(f"GET {response.path} answered {response.status}")
        relative = response.path.split("?", 1)[0].lstrip("/")
        if not relative or relative.endswith("/"):
            relative += self.manifest.index
        expected = self.files.get(relative)
        if expected is None:
            raise BodyMismatchError(f"GET {response.path}: not in the site manifest")
        if response.size_bytes != expected.size_bytes:
            raise BodyMismatchError(
                f"GET {response.path}: {response.size_bytes} bytes, manifest says "
                f"{expected.size_bytes}"
            )
        if response.digest.hexdigest() != expected.sha256:
            raise BodyMismatchError(f"GET {response.path}: sha256 differs from the manifest")
        self._verified.add(response.path)

    def _record(
        self,
        connection: ClientConnection | None,
        span: probe.ProbeSpan,
        overhead_s: float,
        error: str | None,
    ) -> FetchRecord:
        start_ns = span.start.t_mono_ns

        def rel(t_ns: int) -> float:
            return (t_ns - start_ns) / 1e9 if t_ns else 0.0

        resources = tuple(
            ResourceTiming(
                path=r.path,
                status=r.status,
                size_bytes=r.size_bytes,
                start_s=rel(r.t_request_ns),
                ttfb_s=rel(r.t_headers_ns),
                end_s=rel(r.t_end_ns),
                verified=r.path in self._verified,
            )
            for r in self._responses
        )
        ends = [r.t_end_ns for r in self._responses if r.t_end_ns]
        end_ns = max(ends) if error is None and ends else span.end.t_mono_ns
        first = self._responses[0].t_headers_ns if self._responses else 0
        sent = connection.tally_out.counts().to_dict() if connection else {}
        received = connection.tally_in.counts().to_dict() if connection else {}
        return FetchRecord(
            ok=error is None,
            error=error,
            trial_id=self.trial_id,
            repetition=self.repetition,
            url=self.target.url,
            engine="h2",
            agent_version=__version__,
            tls=self.target.scheme == "https",
            settings=dict(connection.local_settings) if connection else {},
            flow_control=self.options.flow.record(self.options.initial_window_size),
            peer_settings=connection.peer_settings() if connection else {},
            response_s=(end_ns - start_ns) / 1e9,
            ttfb_s=rel(first),
            resources=resources,
            body_bytes=sum(r.size_bytes for r in self._responses),
            cpu_user_s=span.cpu_user_s,
            cpu_sys_s=span.cpu_sys_s,
            cpu_s=span.cpu_s,
            cpu_pct=span.cpu_pct,
            rss_peak_bytes=span.rss_peak_bytes,
            rss_peak_is_fetch=span.rss_peak_is_window,
            sent=sent,
            received=received,
            window_updates_sent=connection.window_updates_sent if connection else 0,
            t_wall_start_ns=span.start.t_wall_ns,
            t_wall_end_ns=span.start.t_wall_ns + (end_ns - start_ns),
            t_mono_start_ns=start_ns,
            t_mono_end_ns=end_ns,
            probe_overhead_s=overhead_s,
            cpu_pin=self.options.cpu_pin,
            marker=self.marker.describe(),
        )
