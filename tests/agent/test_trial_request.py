"""A trial request crosses the process boundary in one of two forms, the `trial` command line
and a warm agent's JSON line; either comes back to the agent as the request the controller
built (agent.trial_request)."""

from __future__ import annotations

import argparse
import json

import pytest

from agent.commands.trial import client_settings, configure_trial
from agent.errors import UsageError
from agent.trial_request import TrialRequest

EVERY_FIELD = TrialRequest(
    "https://192.0.2.1:8443/",
    workload="page",
    protocol="h2",
    engine="nghttp2",
    params=(("verify", "size"),),
    settings=(("initial_window_size", 4095), ("header_table_size", 0)),
    connection_window=4095,
    window_update_policy="half",
    trial_id="run-7",
    manifest="/srv/site/manifest.json",
    marker="fifo:/tmp/marker",
    timeout_s=42.5,
    unrepresentable_window="reject",
    trial_control="192.0.2.1:9000",
    start_at_s=1765000000.25,
    peer_clock_offset_ns=-123_456,
    peer_clock_uncertainty_ns=789,
    ca_file="/srv/tls/ca.pem",
    datagram_bytes=1350,
    event_loop="uvloop",
    cpu=1,
)


def _parsed(request: TrialRequest) -> TrialRequest:
    parser = argparse.ArgumentParser()
    configure_trial(parser)
    words = request.argv()
    assert words[0] == "trial"
    args = parser.parse_args(words[1:])
    return TrialRequest.from_args(args, client_settings(args))


def test_the_command_line_reads_back_as_the_same_request() -> None:
    assert _parsed(EVERY_FIELD) == EVERY_FIELD
    assert _parsed(TrialRequest.from_json(json.loads(EVERY_FIELD.json_line())["request"])) == (
        EVERY_FIELD
    )


def test_a_param_value_reads_back_as_its_word() -> None:
    typed = TrialRequest("http://x/", workload="blob", params=(("size_bytes", 5), ("verify", True)))
    assert _parsed(typed).params == (("size_bytes", "5"), ("verify", "true"))


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "expected a JSON object"),
        ({"url": 1}, "url: expected a string"),
        ({"url": "http://x/", "cores": 2}, "unknown field 'cores'"),
        ({"url": "http://x/", "settings": [["a", 1, 2]]}, "settings: expected [[NAME, VALUE]"),
        ({"url": "http://x/", "marker": {"a": 1}}, "marker: expected a string or a number"),
    ],
)
def test_a_bad_document_is_refused_naming_the_field(document: object, message: str) -> None:
    with pytest.raises(UsageError) as refused:
        TrialRequest.from_json(document)
    assert message in str(refused.value)
