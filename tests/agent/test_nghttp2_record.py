"""The nghttp2 engine's fetch record: size verification against the manifest, failures, bytes."""

from __future__ import annotations

from dataclasses import replace

from agent.engines.nghttp2.options import NghttpOptions
from agent.engines.nghttp2.process import ChildOutcome
from agent.engines.nghttp2.record import build_record, verify
from agent.engines.nghttp2.timing import ResourceTimes
from agent.site.manifest import SiteFile, SiteManifest

MANIFEST = SiteManifest(
    index="index.html",
    files=(
        SiteFile("index.html", 100, "0" * 64, "text/html"),
        SiteFile("a.css", 50, "1" * 64, "text/css"),
    ),
    seed=0,
    total_bytes=150,
)  # fmt: skip
OPTIONS = NghttpOptions.create({}, 65535, "map")
PAGE = (
    ResourceTimes(1, "/", 200, 100, 0.001, 0.002, 0.003),
    ResourceTimes(3, "/a.css", 200, 50, 0.003, 0.004, 0.005),
)
CHILD = ChildOutcome(
    exit_status=0, stdout=b"x" * 10, stderr=b"", timed_out=False, cpu_user_s=0.01,
    cpu_sys_s=0.02, rss_peak_bytes=5 << 20, io={"wchar": 1000, "rchar": 9}, t_mono_start_ns=0,
    t_mono_end_ns=50_000_000, t_wall_start_ns=10**18,
)  # fmt: skip


def _record(
    times: tuple[ResourceTimes, ...] = PAGE, child: ChildOutcome = CHILD
) -> dict[str, object]:
    return build_record(
        trial_id="t1", repetition=1, url="http://s/", protocol="h2c", options=OPTIONS,
        child=child, times=times, failure=None, manifest=MANIFEST, page_path="/", har_bytes=90,
        command=("nghttp",), marker="none", cpu_pin=None, probe_overhead_s=0.0, timeout_s=5,
    ).to_dict()  # fmt: skip


def test_a_complete_page() -> None:
    record = _record()
    assert record["ok"] and record["error"] is None
    assert record["response_s"] == 0.005 and record["ttfb_s"] == 0.002
    assert record["cpu_s"] == 0.03 and record["cpu_pct"] == 60.0
    assert record["sent"] == {"bytes": 1000 - 10 - 90, "frames": None, "frame_bytes": None}
    assert record["t_wall_end_ns"] == 10**18 + 50_000_000
    assert record["process_wall_s"] == 0.05 and record["body_bytes"] == 150


def test_verification_by_size_status_and_completeness() -> None:
    short = (PAGE[0], replace(PAGE[1], size_bytes=49))
    resources, error = verify(short, MANIFEST, "/")
    assert error == "GET /a.css: 49 bytes, manifest says 50"
    assert [r.verified for r in resources] == [True, False]
    assert verify((replace(PAGE[0], status=404),), MANIFEST, "/")[1] == "GET / answered 404"
    assert verify((replace(PAGE[1], path="/b.css"),), MANIFEST, "/")[1] == (
        "GET /b.css: not in the site manifest"
    )
    assert verify(PAGE[:1], MANIFEST, "/")[1] == (
        "nghttp fetched 1 of the page's 2 files (page /); missing a.css"
    )
    assert verify((), MANIFEST, "/")[1] == "nghttp fetched none of the page's files"


def test_failures_say_what_nghttp_said() -> None:
    refused = replace(CHILD, stderr=b"[ERROR] Could not connect to the address 127.0.0.1\n")
    record = _record((), refused)
    assert record["error"] == (
        "nghttp fetched none of the page's files "
        "(nghttp: [ERROR] Could not connect to the address 127.0.0.1)"
    )
    assert _record(PAGE, replace(CHILD, timed_out=True, exit_status=-9))["error"] == (
        "timeout: page fetch took longer than 5 s (nghttp killed)"
    )
    assert _record(PAGE, replace(CHILD, exit_status=1))["error"] == "nghttp exited 1"
    assert _record(PAGE, replace(CHILD, io=None))["sent"] is None


def test_the_record_says_which_fields_are_unavailable_and_why() -> None:
    counted = _record(PAGE, CHILD)
    assert set(counted["unavailable"]) == {
        "sent.frames", "sent.frame_bytes", "received", "peer_settings", "window_updates_sent",
        "settings_received",
        "phases",
    }  # fmt: skip
    unavailable = counted["unavailable"]
    assert all(
        "only with -v" in why for key, why in unavailable.items() if key != "settings_received"
    )
    assert "only verbosely" in unavailable["settings_received"]
    for field in ("received", "window_updates_sent", "settings_received"):
        assert counted[field] is None
    unread = replace(CHILD, io=None, io_unavailable="/proc/self/io: No such file or directory")
    uncounted = _record(PAGE, unread)
    assert uncounted["sent"] is None
    assert uncounted["unavailable"]["sent"] == (
        "nghttp's write(2) total is unreadable: /proc/self/io: No such file or directory"
    )
