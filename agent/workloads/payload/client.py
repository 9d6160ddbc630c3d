"""The payload workload's client: POST the trial's dataset `messages` times on the trial's
connection, one after another, each encoded afresh (the serialisation is part of what a message
costs) and uploaded under the server's flow-control window; every answer must be 200, its
decode figures are kept. The dataset and its digest are made once, before any trial is timed."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from functools import partial

from agent.client.connect import Target
from agent.client.options import RunPlan
from agent.client.response import Response
from agent.client.run import Prepared
from agent.client.trial import TrialSession
from agent.errors import FetchError
from agent.workloads.payload.codecs import ENCODINGS, Encode, dime
from agent.workloads.payload.dataset import Dataset, digest, make_dataset, value_count
from agent.workloads.payload.protocol import (
    DIGEST_HEADER,
    PATH,
    SOAP_ACTION,
    SOAP_ACTION_HEADER,
    DecodeFigures,
    Header,
)
from agent.workloads.payload.spec import PAYLOAD


@dataclass(frozen=True)
class MessageTiming:
    """One message's figures; CPU is the client thread's, timed around the codec alone."""

    body_bytes: int
    latency_s: float  # request sent -> response end
    serialise_cpu_s: float
    deserialise_cpu_s: float  # reading the (empty) answer and its figures
    server: DecodeFigures


def encoder(encoding: str, dime_chunk_bytes: int) -> Encode:
    if encoding == "dime":
        return partial(dime.encode, chunk_bytes=dime_chunk_bytes)
    return ENCODINGS[encoding].encode


def request_headers(encoding: str, sha256: str) -> tuple[Header, ...]:
    """The fields every message of a trial carries besides its Content-Type."""
    headers = [(DIGEST_HEADER, sha256.encode())]
    if ENCODINGS[encoding].soap:
        headers.append((SOAP_ACTION_HEADER, SOAP_ACTION))
    return tuple(headers)


async def prepare(plan: RunPlan, target: Target) -> Prepared:
    params = plan.params
    data = str(params["data"])
    size = int(params["matrix_side"] if data == "matrix" else params["record_count"])
    dataset = make_dataset(data, size, int(params["seed"]))
    encoding = str(params["encoding"])
    encode = encoder(encoding, int(params["dime_chunk_bytes"]))
    path = target.path.rstrip("/") + PATH
    headers = request_headers(encoding, digest(dataset))
    messages = int(params["messages"])
    return Prepared(params, lambda: PayloadDriver(path, dataset, headers, encode, messages))


def read_answer(response: Response) -> DecodeFigures:
    """The server's figures from a 200 with an empty body; FetchError with the server's reason
    otherwise."""
    if response.status != 200:
        reason = bytes(response.body or b"").decode("utf-8", "replace").strip()
        raise FetchError(f"POST {response.path} answered {response.status}: {reason}")
    if response.size_bytes:
        raise FetchError(f"POST {response.path}: {response.size_bytes} body bytes, expected none")
    return DecodeFigures.from_headers(response.headers)


class PayloadDriver:
    def __init__(
        self,
        path: str,
        dataset: Dataset,
        headers: tuple[Header, ...],
        encode: Encode,
        messages: int,
    ) -> None:
        self.path = path
        self.dataset = dataset
        self.headers = headers  # request_headers: the same on every message
        self.encode = encode
        self.messages = messages
        self.responses: list[Response] = []
        self.timings: list[MessageTiming] = []

    async def run(self, session: TrialSession) -> None:
        for _ in range(self.messages):
            start_ns = time.thread_time_ns()
            content_type, body = self.encode(self.dataset)
            encoded_ns = time.thread_time_ns()
            headers = ((b"content-type", content_type.encode()), *self.headers)
            response = await session.call(b"POST", self.path, headers, body)
            self.responses.append(response)
            answered_ns = time.thread_time_ns()
            figures = read_answer(response)
            read_ns = time.thread_time_ns()
            self.timings.append(
                MessageTiming(
                    body_bytes=len(body),
                    latency_s=(response.t_end_ns - response.t_request_ns) / 1e9,
                    serialise_cpu_s=(encoded_ns - start_ns) / 1e9,
                    deserialise_cpu_s=(read_ns - answered_ns) / 1e9,
                    server=figures,
                )
            )

    def metrics(self) -> dict[str, object]:
        timings = self.timings
        figures: dict[str, object] = dict.fromkeys(field.name for field in PAYLOAD.fields)
        figures["message_count"] = len(timings)
        figures["values_per_message"] = value_count(self.dataset)
        if not timings:
            return figures
        latencies = [t.latency_s for t in timings]
        figures.update(
            request_body_bytes=timings[0].body_bytes,
            latency_mean_s=statistics.fmean(latencies),
            latency_p50_s=statistics.median(latencies),
            client_serialise_cpu_s=statistics.fmean(t.serialise_cpu_s for t in timings),
            client_deserialise_cpu_s=statistics.fmean(t.deserialise_cpu_s for t in timings),
            server_deserialise_cpu_s=statistics.fmean(t.server.cpu_ns / 1e9 for t in timings),
            server_parse_rss_peak_bytes=max(t.server.rss_peak_bytes for t in timings),
            server_parse_rss_added_bytes=max(t.server.rss_added_bytes for t in timings),
        )
        return figures

    def extra(self, start_ns: int) -> dict[str, object]:
        return {
            "messages": [
                {
                    "body_bytes": t.body_bytes,
                    "latency_s": t.latency_s,
                    "serialise_cpu_s": t.serialise_cpu_s,
                    "deserialise_cpu_s": t.deserialise_cpu_s,
                    "server_decode_cpu_s": t.server.cpu_ns / 1e9,
                    "server_parse_rss_peak_bytes": t.server.rss_peak_bytes,
                }
                for t in self.timings
            ]
        }
