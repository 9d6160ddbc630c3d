"""The payload workload over real loopback HTTP/2: our client's trials against our server in
every encoding (the record's figures, the server's decode figures reaching it, frames), curl
posting each encoding's body to our server, and what a hostile or broken body gets: 400 or 413
with a one-line reason, counted, the server's memory bounded and the server serving on."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.workloads.payload.codecs import BY_MEDIA_TYPE, ENCODINGS, media_type
from agent.workloads.payload.dataset import digest, make_dataset
from agent.workloads.payload.protocol import (
    DECODE_CPU_HEADER,
    DIGEST_HEADER,
    PATH,
    REFUSALS_HEADER,
    RSS_ADDED_HEADER,
    RSS_PEAK_HEADER,
    SOAP_ACTION,
    SOAP_ACTION_HEADER,
)
from tests.agent.servers import RunningServer, agent_server, run_agent
from tests.agent.test_payload_refusals import BILLION_LAUGHS, nested_multipart
from tests.conftest import require_tool

BODY_LIMIT_BYTES = 4 * 2**20
NAMES = sorted(ENCODINGS)


@pytest.fixture(scope="module")
def payload_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    tmp = tmp_path_factory.mktemp("payload")
    limit = f"body_limit_bytes={BODY_LIMIT_BYTES}"
    with agent_server(None, tmp, "--workload", "payload", "--param", limit) as running:
        yield running


def trial(url: str, trial_id: str, *params: str) -> tuple[int, dict[str, object]]:
    args = [arg for param in params for arg in ("--param", param)]
    result = run_agent(
        "trial", url, "--json", "--workload", "payload", "--trial-id", trial_id, *args,
        "--setting", "initial_window_size=16384",
    )  # fmt: skip
    assert result.stdout, result.stderr
    record: dict[str, object] = json.loads(result.stdout)
    return result.returncode, record


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(("data", "size"), [("matrix", 24), ("structs", 150)])
def test_every_encoding_runs_a_trial(
    payload_server: RunningServer, name: str, data: str, size: int
) -> None:
    size_param = f"matrix_side={size}" if data == "matrix" else f"record_count={size}"
    trial_id = f"payload-{name}-{data}"
    status, record = trial(
        payload_server.url, trial_id, f"encoding={name}", f"data={data}", size_param, "messages=3"
    )
    assert status == 0 and record["ok"] is True, record["error"]
    metrics = record["metrics"]
    assert isinstance(metrics, dict)
    body_bytes = len(ENCODINGS[name].encode(make_dataset(data, size, 0))[1])
    assert metrics["message_count"] == 3
    assert metrics["values_per_message"] == (size * size if data == "matrix" else size)
    assert metrics["request_body_bytes"] == body_bytes
    assert 0 < metrics["latency_p50_s"] <= record["response_s"]
    assert 0 < metrics["latency_mean_s"] <= record["response_s"]
    assert metrics["client_serialise_cpu_s"] > 0
    assert metrics["client_deserialise_cpu_s"] >= 0
    assert metrics["server_deserialise_cpu_s"] > 0
    assert metrics["server_parse_rss_peak_bytes"] > 2**20
    sent = record["sent"]
    assert isinstance(sent, dict)
    # Every body byte went up as DATA (the trial header and HEADERS frames aside).
    assert sent["frame_bytes"]["DATA"] == 3 * body_bytes + 9 * sent["frames"]["DATA"]
    # 16 KiB frames at most: the server's default SETTINGS_MAX_FRAME_SIZE.
    assert sent["frames"]["DATA"] >= 3 * -(-body_bytes // 16384)
    messages = record["messages"]
    assert isinstance(messages, list) and len(messages) == 3
    server_trial = payload_server.wait_for_trials(trial_id)[trial_id]
    assert server_trial["ok"] is True and server_trial["requests"] == 3


def test_dime_chunking_changes_the_body_not_the_values(payload_server: RunningServer) -> None:
    status, record = trial(
        payload_server.url,
        "payload-chunks",
        "encoding=dime",
        "matrix_side=16",
        "dime_chunk_bytes=100",
    )
    assert status == 0, record["error"]
    metrics = record["metrics"]
    assert isinstance(metrics, dict)
    # 2053 packed bytes in 21 chunk records of 12 header bytes each, less the one record's.
    unchunked = len(ENCODINGS["dime"].encode(make_dataset("matrix", 16, 0))[1])
    assert metrics["request_body_bytes"] == unchunked + 20 * 12


def curl_post(
    url: str,
    content_type: str,
    body: bytes,
    sha256: str,
    tmp: Path,
    soap_action: bytes | None = SOAP_ACTION,
) -> tuple[int, dict[str, str], str]:
    """POST with curl; a SOAP encoding's request carries `soap_action` unless it is None."""
    body_path = tmp / "body"
    body_path.write_bytes(body)
    encoding = BY_MEDIA_TYPE.get(media_type(content_type))
    fields = ["-H", f"content-type: {content_type}", "-H", f"{DIGEST_HEADER.decode()}: {sha256}"]
    if encoding is not None and encoding.soap and soap_action is not None:
        fields += ["-H", f"{SOAP_ACTION_HEADER.decode()}: {soap_action.decode()}"]
    done = subprocess.run(
        [
            "curl", "--http2-prior-knowledge", "-sS", "-D", "-", "-o", str(tmp / "answer"),
            *fields, "--data-binary", f"@{body_path}", f"{url.rstrip('/')}{PATH}",
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    # 92: the server reset the rest of the upload after answering (a 413), which RFC 9113
    # section 8.1 allows; curl reports it though the response arrived whole.
    assert done.returncode in (0, 92), done.stderr
    lines = done.stdout.splitlines()
    status = int(lines[0].split()[1])
    headers = {
        name.strip().lower(): value.strip()
        for name, _, value in (line.partition(":") for line in lines[1:] if ":" in line)
    }
    # Bytes as sent: read_text would turn a carriage return into a line break.
    return status, headers, (tmp / "answer").read_bytes().decode()


@pytest.mark.parametrize("name", NAMES)
def test_curl_posts_each_encoding(payload_server: RunningServer, name: str, tmp_path: Path) -> None:
    require_tool("curl")
    dataset = make_dataset("structs", 40, 2)
    content_type, body = ENCODINGS[name].encode(dataset)
    status, headers, answer = curl_post(
        payload_server.url, content_type, body, digest(dataset), tmp_path
    )
    assert (status, answer) == (200, "")
    assert int(headers[DECODE_CPU_HEADER.decode()]) > 0
    assert int(headers[RSS_PEAK_HEADER.decode()]) > 0
    wrong = digest(make_dataset("structs", 40, 3))
    status, headers, answer = curl_post(payload_server.url, content_type, body, wrong, tmp_path)
    assert status == 400 and "the digest header says" in answer


def refusal_count(headers: dict[str, str]) -> int:
    return int(headers[REFUSALS_HEADER.decode()])


def one_line(answer: str) -> bool:
    return answer.endswith("\n") and len(answer.splitlines()) == 1


def good_message() -> tuple[str, bytes, str]:
    dataset = make_dataset("matrix", 8, 0)
    content_type, body = ENCODINGS["raw"].encode(dataset)
    return content_type, body, digest(dataset)


def refusals_so_far(url: str, tmp: Path) -> int:
    """The count in the answer to a good message (which itself is no refusal)."""
    status, headers, _ = curl_post(url, *good_message(), tmp)
    assert status == 200
    return refusal_count(headers)


SWA_TYPE, SWA_BODY = ENCODINGS["swa"].encode(make_dataset("matrix", 2, 0))


@pytest.mark.parametrize(
    ("content_type", "body", "status", "reason"),
    [
        ("text/xml", BILLION_LAUGHS, 400, "DOCTYPE is not allowed"),
        ("text/xml", b"<a>" * 50_000, 400, "unexpected element"),
        ("application/dime", b"\x0e\x10\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff", 400, "claim"),
        ("application/cbor", b"\x9b" + (2**40).to_bytes(8, "big"), 400, "CBOR"),
        ("application/json", b"[" * 200_000, 400, "JSON"),
        (
            'multipart/related; boundary="x"',
            b"--x\r\nContent-Type: text/xml\r\n\r\n<a",
            400,
            "multipart",
        ),
        ("application/x-unknown", b"data", 415, "none of"),
        # Three that raised something other than a refusal (the stream was reset): a lone
        # surrogate in a JSON text (UnicodeEncodeError when the values were digested),
        (
            "application/json",
            b'{"records":[{"flag":true,"text":"\\ud800","number":1}]}',
            400,
            "a lone surrogate",
        ),
        # parts nested in parts (RecursionError in the email parser),
        ('multipart/related; boundary="b0"', nested_multipart(3000), 400, "parts of its own"),
        # a boundary in RFC 2231's form whose charset cannot decode it (UnicodeError),
        ("multipart/related; boundary*=idna''%FF", SWA_BODY, 400, "multipart: "),
        # And a reason quoting a carriage return from the envelope (it was answered on two
        # lines).
        (
            SWA_TYPE,
            SWA_BODY.replace(b'href="cid:payload@h2iot"', b'href="cid:pay&#13;load@h2iot"'),
            400,
            "no part has the Content-ID <pay load@h2iot>",
        ),
    ],
)
def test_hostile_bodies_are_refused_and_counted(
    payload_server: RunningServer,
    tmp_path: Path,
    content_type: str,
    body: bytes,
    status: int,
    reason: str,
) -> None:
    require_tool("curl")
    sha256 = "0" * 64
    got, headers, answer = curl_post(payload_server.url, content_type, body, sha256, tmp_path)
    assert got == status and reason in answer and one_line(answer)
    if status == 400:  # decoded (and refused) with its memory measured: bounded
        assert int(headers[RSS_ADDED_HEADER.decode()]) < 16 * 2**20
    before = refusal_count(headers)
    got, headers, _ = curl_post(payload_server.url, content_type, body, sha256, tmp_path)
    assert refusal_count(headers) == before + 1
    # The server serves on: a good message right after.
    got, headers, _ = curl_post(payload_server.url, *good_message(), tmp_path)
    assert got == 200
    # Memory stayed bounded while the hostile body was parsed.
    assert int(headers[RSS_PEAK_HEADER.decode()]) < 200 * 2**20


@pytest.mark.parametrize("name", ["soap", "swa", "dime"])
@pytest.mark.parametrize(
    ("soap_action", "status", "reason"),
    [
        (None, 400, "must carry SOAPAction"),
        (b'"urn:elsewhere#op"', 400, "names no operation here"),
        (b'""', 200, ""),  # the intent is the Request-URI's
        (SOAP_ACTION, 200, ""),
    ],
)
def test_soap_action_is_checked_before_the_body(
    payload_server: RunningServer,
    tmp_path: Path,
    name: str,
    soap_action: bytes | None,
    status: int,
    reason: str,
) -> None:
    """SOAP 1.1 section 6.1.1: a SOAP HTTP request carries SOAPAction; without ours (or "")
    it is refused 400, counted, and the server serves on."""
    require_tool("curl")
    dataset = make_dataset("structs", 5, 0)
    content_type, body = ENCODINGS[name].encode(dataset)
    before = refusals_so_far(payload_server.url, tmp_path)
    got, _, answer = curl_post(
        payload_server.url, content_type, body, digest(dataset), tmp_path, soap_action
    )
    assert got == status and reason in answer
    assert refusals_so_far(payload_server.url, tmp_path) == before + (status != 200)


def test_a_body_over_the_limit_is_counted(payload_server: RunningServer, tmp_path: Path) -> None:
    """Our client declares its body's length: the connection answers 413 before the handler
    would read it, and the next answer's count has moved by one."""
    require_tool("curl")
    before = refusals_so_far(payload_server.url, tmp_path)
    status, record = trial(
        payload_server.url, "payload-counted", "encoding=raw", "matrix_side=1024", "messages=1"
    )  # 8 MiB, over the 4 MiB limit
    assert status == 1 and "answered 413" in str(record["error"])
    assert refusals_so_far(payload_server.url, tmp_path) == before + 1


def test_a_body_over_the_limit_is_answered_413_before_it_is_read(
    payload_server: RunningServer,
) -> None:
    """Our client uploads a 27 MB SOAP body to a server that takes 4 MiB: the trial fails with
    the 413, the server's memory over that trial stays far below the body, and it serves on.
    (curl 7.88 sometimes reports the reset that follows a 413 as error 92 and drops the
    response, so the client here is ours.)"""
    status, record = trial(payload_server.url, "payload-small", "encoding=raw", "matrix_side=8")
    assert status == 0, record["error"]
    status, record = trial(
        payload_server.url, "payload-too-big", "encoding=soap", "matrix_side=1024", "messages=1"
    )
    assert status == 1 and record["ok"] is False
    assert "answered 413" in str(record["error"])
    trials = payload_server.wait_for_trials("payload-small", "payload-too-big")
    small, refused = (
        int(trials["payload-small"]["rss_peak_bytes"]),
        int(trials["payload-too-big"]["rss_peak_bytes"]),
    )
    assert refused < small + 16 * 2**20
    status, record = trial(payload_server.url, "payload-after", "encoding=cbor", "matrix_side=8")
    assert status == 0, record["error"]
