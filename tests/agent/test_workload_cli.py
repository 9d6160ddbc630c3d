"""The workload options on the command line: each refusal is exit status 2 and one line naming
the workload, the param or the option; `workloads` lists what the registry declares."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from agent.engines import engines_where
from agent.workloads import SPECS
from tests.agent.servers import run_agent

URL = "http://127.0.0.1:1/"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["trial", URL, "--workload", "bulk"],
            "unknown workload 'bulk' (known: page, blob",
        ),
        (
            ["serve", "--workload", "bulk"],
            "unknown workload 'bulk' (known: page, blob",
        ),
        (["trial", URL], "the following arguments are required: --workload"),
        (
            ["trial", URL, "--workload", "blob", "--param", "size=1"],
            "--param size: blob has no such parameter (its parameters: size_bytes, requests, mode, "
            "verify)",
        ),
        (
            ["trial", URL, "--workload", "blob", "--param", "size_bytes=70000000"],
            "--param size_bytes: 70000000 is outside 0..67108864",
        ),
        (
            ["trial", URL, "--workload", "blob", "--param", "requests=0"],
            "--param requests: 0 is outside 1..1000",
        ),
        (
            ["trial", URL, "--workload", "blob", "--param", "mode=parallel"],
            '--param mode: expected one of "sequential", "concurrent", got "parallel"',
        ),
        (
            ["trial", URL, "--workload", "blob", "--param", "requests=4.5"],
            "--param requests: expected an integer, got '4.5'",
        ),
        (
            # A client param given to serve.
            ["serve", "--workload", "blob", "--param", "size_bytes=10"],
            "--param size_bytes: a client parameter of blob, for trial; this command takes its "
            "server parameters (none)",
        ),
        (
            # A setup param (the controller's, for the site build) given to trial.
            ["trial", URL, "--workload", "page", "--param", "total_bytes=100000"],
            "--param total_bytes: a setup parameter of page, for no command; this command takes "
            "its client parameters (verify)",
        ),
        (
            ["serve", "--workload", "page", "--param", "site_seed=1", "--root", "."],
            "--param site_seed: a setup parameter of page",
        ),
        (
            ["trial", URL, "--workload", "blob", "--engine", "nghttp2"],
            "--engine nghttp2: the blob workload runs on builtin",
        ),
        (
            ["serve", "--workload", "blob", "--engine", "nghttp2"],
            "--engine nghttp2: the blob workload runs on builtin",
        ),
        (
            ["trial", URL, "--workload", "blob", "--manifest", "m.json"],
            "--manifest is for the page workload, not blob",
        ),
        (["serve", "--workload", "blob", "--root", "."], "--root is for the page workload"),
        (["serve"], "--root DIR (the site) is required for the page workload"),
        (["serve", "--engine", "nghttp2"], "--root DIR (the site) is required"),
        (
            ["trial", URL, "--workload", "blob", "--initial-window-size", "256"],
            "unrecognized arguments: --initial-window-size 256",
        ),
        (["fetch", URL, "--param", "size_bytes=1"], "unrecognized arguments: --param"),
    ],
)
def test_workload_usage_errors_are_one_line_naming_it(args: list[str], message: str) -> None:
    result = run_agent(*args)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("h2iot-agent: error: ")
    assert message in lines[0]


def test_workloads_json_is_the_registry() -> None:
    result = run_agent("workloads", "--json")
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 1
    listed = json.loads(result.stdout)
    assert [entry["kind"] for entry in listed] == list(SPECS)
    # Which engines run a workload is each engine's to say, listed beside the spec.
    specs = [{**asdict(s), "engines": list(engines_where(workload=s.kind))} for s in SPECS.values()]
    expected = json.loads(json.dumps(specs))
    assert listed == expected
    blob = listed[1]
    assert [p["name"] for p in blob["params"]] == ["size_bytes", "requests", "mode", "verify"]
    assert blob["params"][2]["choices"] == ["sequential", "concurrent"]
    assert [f["name"] for f in blob["fields"]] == [
        "request_count",
        "body_bytes",
        "latency_mean_s",
        "latency_max_s",
    ]


def test_workloads_lists_every_param_and_field() -> None:
    result = run_agent("workloads")
    assert result.returncode == 0, result.stderr
    for spec in SPECS.values():
        assert f"{spec.kind}: {spec.doc}" in result.stdout
        for param in spec.params:
            assert f"param {param.name} ({param.side}, {param.kind} " in result.stdout
        for field in spec.fields:
            assert f"field {field.name}: {field.doc}" in result.stdout
