"""nghttp's `-s` table and HAR file, parsed from real output (tests/agent/nghttp2_output/, made
by nghttp 1.52 against nghttpd on a 200 kB site, -w 12 -W 12) and from mangled variants."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.engines.nghttp2.errors import NghttpOutputError
from agent.engines.nghttp2.har import parse_har
from agent.engines.nghttp2.stats import parse_duration_us, parse_stats
from agent.engines.nghttp2.timing import resource_times

OUTPUT = Path(__file__).parent / "nghttp2_output"
PAGE_PATHS = {
    "/",
    "/css/style.css",
    "/js/vendor.js",
    "/js/app.js",
    "/img/photo-1.jpg",
    "/img/photo-2.jpg",
    "/img/photo-3.jpg",
    "/img/photo-4.jpg",
}


def test_durations_in_each_unit() -> None:
    assert parse_duration_us("69us") == 69
    assert parse_duration_us("1.24ms") == 1240
    assert parse_duration_us("2.5s") == 2_500_000
    with pytest.raises(NghttpOutputError, match="not a duration"):
        parse_duration_us("1.2 ms")


def test_stats_table_of_a_page() -> None:
    rows = parse_stats((OUTPUT / "page.stats").read_text())
    assert [r.stream_id for r in rows] == [1, 3, 5, 7, 15, 13, 11, 9]
    first = rows[0]
    assert (first.response_end_us, first.request_start_us, first.process_us) == (535, 69, 466)
    assert (first.status, first.size_text, first.path, first.pushed) == (200, "4K", "/", False)
    assert rows[4].response_end_us == 1240
    assert {r.path for r in rows} == PAGE_PATHS


def test_stats_pushed_rows_and_errors() -> None:
    text = (OUTPUT / "page.stats").read_text()
    pushed = text.replace("  2     +1.63ms       +542us", "  2     +1.63ms *     +542us")
    pushed = pushed.replace("  9     +1.63ms       +542us", "  2     +1.63ms *     +542us")
    assert parse_stats(pushed)[-1].pushed
    assert parse_stats((OUTPUT / "notfound.stats").read_text())[0].status == 404
    with pytest.raises(NghttpOutputError, match="no request table"):
        parse_stats("***** Statistics *****\n")
    with pytest.raises(NghttpOutputError, match="cannot read the row"):
        parse_stats(text.replace("+535us", "soon"))


def test_har_of_a_page() -> None:
    har = parse_har((OUTPUT / "page.har").read_text())
    assert len(har.entries) == 8
    assert {e.status for e in har.entries} == {200}
    first = next(e for e in har.entries if e.stream_id == 1)
    assert first.url.endswith("/") and first.size_bytes > 0
    assert har.connect_end_ms is not None and 0 < har.connect_end_ms < first.time_ms


def test_har_body_sizes_are_the_manifest_sizes() -> None:
    har = parse_har((OUTPUT / "page.har").read_text())
    sizes = json.loads((OUTPUT / "page.har").read_text())
    assert [e.size_bytes for e in har.entries] == [
        entry["response"]["content"]["size"] for entry in sizes["log"]["entries"]
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "not a HAR log"),
        ('{"log": {}}', "not a HAR log"),
        ('{"log": {"entries": {}}}', "not an array"),
        ('{"log": {"entries": [{"time": 1}]}}', r"entries\[0\] lacks"),
    ],
)
def test_har_errors_name_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(NghttpOutputError, match=message):
        parse_har(text)


def test_har_numbers_must_be_numbers() -> None:
    document = json.loads((OUTPUT / "page.har").read_text())
    document["log"]["entries"][0]["timings"]["wait"] = "soon"
    with pytest.raises(NghttpOutputError, match=r"entries\[0\].timings.wait is not a number"):
        parse_har(json.dumps(document))


def test_resource_times_combine_har_and_stats() -> None:
    har = parse_har((OUTPUT / "page.har").read_text())
    rows = parse_stats((OUTPUT / "page.stats").read_text())
    times = resource_times(har, rows)
    assert {t.path for t in times} == PAGE_PATHS
    assert [t.end_s for t in times] == sorted(t.end_s for t in times)
    by_stream = {t.stream_id: t for t in times}
    assert har.connect_end_ms is not None
    for row in rows:
        t = by_stream[row.stream_id]
        assert 0 <= t.start_s <= t.ttfb_s <= t.end_s
        # The -s table and the HAR agree on each response's end to within nghttp's rounding.
        assert t.end_s == pytest.approx(har.connect_end_ms / 1e3 + row.response_end_us / 1e6,
                                        abs=2e-5)  # fmt: skip
    index = by_stream[1]
    assert index.start_s == pytest.approx(har.connect_end_ms / 1e3 + 69e-6, abs=4e-6)


def test_resource_times_need_every_stream_in_the_table() -> None:
    har = parse_har((OUTPUT / "page.har").read_text())
    rows = parse_stats((OUTPUT / "page.stats").read_text())
    with pytest.raises(NghttpOutputError, match="stream 3 has no start"):
        resource_times(har, [r for r in rows if r.stream_id != 3])
