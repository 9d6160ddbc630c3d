"""The blob workload's client: GET `/blob/<size_bytes>` `requests` times on the trial's
connection, one after another or all at once (up to the server's MAX_CONCURRENT_STREAMS), every
body checked by size and sha256 against the deterministic content (agent.workloads.bodies)."""

from __future__ import annotations

from agent.client.connect import Target
from agent.client.options import RunPlan
from agent.client.response import Response
from agent.client.run import Prepared
from agent.client.trial import TrialSession, check_body
from agent.workloads.blob.body import PATH_PREFIX
from agent.workloads.bodies import blob_sha256
from agent.workloads.spec import hashes_bodies


async def prepare(plan: RunPlan, target: Target) -> Prepared:
    params = plan.params
    size = int(params["size_bytes"])
    # Hashing up to 64 MiB takes a while: once, before any trial is timed.
    expected = blob_sha256(size) if hashes_bodies(params) else None
    base = target.path.rstrip("/")
    path = f"{base}{PATH_PREFIX}{size}"
    requests = int(params["requests"])
    concurrent = params["mode"] == "concurrent"
    return Prepared(params, lambda: BlobDriver(path, size, expected, requests, concurrent))


class BlobDriver:
    def __init__(
        self, path: str, size: int, sha256: str | None, requests: int, concurrent: bool
    ) -> None:
        self.path = path
        self.size = size
        self.sha256 = sha256
        self.hashed = sha256 is not None
        self.requests = requests
        self.concurrent = concurrent
        self.responses: list[Response] = []
        self._complete: list[Response] = []

    async def run(self, session: TrialSession) -> None:
        if self.concurrent:
            await session.request_all([self.path] * self.requests, self._check, self.hashed)
            return
        for _ in range(self.requests):
            self._check(await session.request(self.path, hashed=self.hashed))

    def _check(self, response: Response) -> None:
        self.responses.append(response)
        check_body(response, self.size, self.sha256, "blob")
        self._complete.append(response)

    def metrics(self) -> dict[str, object]:
        latencies = [(r.t_end_ns - r.t_request_ns) / 1e9 for r in self._complete]
        return {
            "request_count": len(self._complete),
            "body_bytes": sum(r.size_bytes for r in self.responses),
            "latency_mean_s": sum(latencies) / len(latencies) if latencies else None,
            "latency_max_s": max(latencies, default=None),
        }

    def extra(self, start_ns: int) -> dict[str, object]:
        return {}
