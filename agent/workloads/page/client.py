"""The page workload's client (the h2 engine): GET the page, then its subresources concurrently
(bounded by the server's MAX_CONCURRENT_STREAMS, as a browser and `nghttp -a` do), each body
checked against the site manifest by size and sha256 (`verify = "size"`: by size alone, as
`nghttp -nas`). A wrong byte fails the trial; with "size", a wrong length."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agent.client.connect import Target
from agent.client.options import RunPlan, TrialOptions
from agent.client.response import Response
from agent.client.run import Prepared
from agent.client.trial import Connector, TrialConnection, TrialSession, check_body
from agent.errors import BodyMismatchError, FetchError, PeerProtocolError, SiteError
from agent.html_links import subresource_paths
from agent.site.manifest import MANIFEST_NAME, SiteManifest, parse_manifest
from agent.workloads.page.record import ResourceTiming, page_extra, page_metrics, page_params
from agent.workloads.spec import VERIFY_PARAM, hashes_bodies


def read_manifest(path: Path) -> SiteManifest:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SiteError(f"--manifest {path}: {exc.strerror}") from None
    return parse_manifest(text, source=str(path))


async def download_manifest(target: Target, options: TrialOptions) -> SiteManifest:
    """The site's manifest from the server itself, outside any timed trial, within the trial
    timeout (connecting included). Every failure is a FetchError naming the manifest: the
    trials it was for fail with it."""
    path = target.path.rsplit("/", 1)[0] + "/" + MANIFEST_NAME
    connection: TrialConnection | None = None

    async def get() -> Response:
        nonlocal connection
        connection, _connected = await Connector(target, options).open()
        return await connection.request(target.authority, target.scheme, path, [], keep_body=True)

    try:
        response = await asyncio.wait_for(get(), options.timeout_s)
    except TimeoutError:
        raise FetchError(
            f"timeout: no answer to GET {path} (the site manifest) from {target.authority} "
            f"within {options.timeout_s:g} s"
        ) from None
    except PeerProtocolError as exc:
        raise FetchError(f"{target.url}: GET {path} (the site manifest): {exc}") from None
    finally:
        if connection is not None:
            await connection.close()
    if response.status != 200 or response.body is None:
        raise FetchError(f"{target.url}: GET {path} answered {response.status}; pass --manifest")
    text = bytes(response.body).decode("utf-8", errors="replace")
    try:
        return parse_manifest(text, source=f"{target.url}{path}")
    except SiteError as exc:  # the server's mistake here, not the user's
        raise FetchError(str(exc)) from None


async def site_manifest(plan: RunPlan, target: Target) -> SiteManifest:
    """`--manifest`, else the server's own, for either engine."""
    if plan.manifest_path is not None:
        return read_manifest(plan.manifest_path)
    return await download_manifest(target, plan.options)


async def prepare(plan: RunPlan, target: Target) -> Prepared:
    manifest = await site_manifest(plan, target)
    hashed = hashes_bodies(plan.params)
    params = {**page_params(manifest), VERIFY_PARAM.name: plan.params[VERIFY_PARAM.name]}
    return Prepared(params, lambda: PageDriver(manifest, target.path, hashed))


class PageDriver:
    def __init__(self, manifest: SiteManifest, page_path: str, hashed: bool = True) -> None:
        self.manifest = manifest
        self.hashed = hashed
        self.files = manifest.by_path()
        self.page_path = page_path
        self.responses: list[Response] = []
        self._verified: set[str] = set()

    async def run(self, session: TrialSession) -> None:
        index = await session.request(self.page_path, keep_body=True, hashed=self.hashed)
        self._check(index)
        assert index.body is not None
        html = bytes(index.body).decode("utf-8", errors="replace")
        await session.request_all(subresource_paths(html, self.page_path), self._check, self.hashed)

    def _check(self, response: Response) -> None:
        self.responses.append(response)
        if response.status != 200:
            raise FetchError(f"GET {response.path} answered {response.status}")
        relative = response.path.split("?", 1)[0].lstrip("/")
        if not relative or relative.endswith("/"):
            relative += self.manifest.index
        expected = self.files.get(relative)
        if expected is None:
            raise BodyMismatchError(f"GET {response.path}: not in the site manifest")
        check_body(
            response, expected.size_bytes, expected.sha256 if self.hashed else None, "manifest"
        )
        self._verified.add(response.path)

    def _resources(self, start_ns: int) -> tuple[ResourceTiming, ...]:
        def rel(t_ns: int) -> float:
            return (t_ns - start_ns) / 1e9 if t_ns else 0.0

        return tuple(
            ResourceTiming(
                path=r.path,
                status=r.status,
                size_bytes=r.size_bytes,
                start_s=rel(r.t_request_ns),
                ttfb_s=rel(r.t_headers_ns),
                end_s=rel(r.t_end_ns),
                verified=r.path in self._verified,
            )
            for r in self.responses
        )

    def metrics(self) -> dict[str, object]:
        # Relative times do not matter to the counts: any start will do.
        return page_metrics(self._resources(0))

    def extra(self, start_ns: int) -> dict[str, object]:
        return page_extra(self._resources(start_ns), "sha256" if self.hashed else "size")
