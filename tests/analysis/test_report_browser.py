"""report.html in a real browser (headless Chromium through selenium and chromedriver, Debian's
packages: .ci/apt/browser.txt): at 1280 x 720 px the first screen shows the headline figure
(its <img> loaded and wholly inside the screen, drawn at a readable width) and the page is no
wider than the window. The screenshot of that first screen is saved in the test's tmp_path.

Skipped only where CI is unset and Chromium, chromedriver or selenium is missing; with CI set a
missing piece fails the test (tests/ci_guard.py would fail a skip anyway).
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from PIL import Image

from analysis.load import load_run
from analysis.report import write_report

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WIDTH, HEIGHT = 1280, 720
LOAD_TIMEOUT_S = 60
# The headline figure must be readable, not a thumbnail: half the window wide, or (a figure of
# one panel, narrower than that) most of its own size.
MIN_FIGURE_WIDTH = WIDTH // 2
MIN_FIGURE_SCALE = 0.75

_MEASURE = """
const img = document.querySelector('figure.lead img');
const box = img ? img.getBoundingClientRect() : null;
return {
  found: img !== null,
  complete: img ? img.complete : false,
  naturalWidth: img ? img.naturalWidth : 0,
  top: box ? box.top : null, bottom: box ? box.bottom : null,
  left: box ? box.left : null, right: box ? box.right : null, width: box ? box.width : 0,
  innerWidth: window.innerWidth, innerHeight: window.innerHeight,
  scrollWidth: document.documentElement.scrollWidth,
  openDetails: document.querySelectorAll('details[open]').length,
  details: Array.from(document.querySelectorAll('details > summary')).map(s => s.textContent),
};
"""


def _missing() -> list[str]:
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.exists()]
    if importlib.util.find_spec("selenium") is None:
        missing.append("selenium (PyPI)")
    return missing


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    missing = _missing()
    if missing:
        where = "apt-get install -y chromium chromium-driver; pip install selenium"
        if not os.environ.get("CI"):
            pytest.skip(f"CI unset and {', '.join(missing)} missing ({where})")
        pytest.fail(f"CI is set but {', '.join(missing)} missing ({where})")
    from selenium import webdriver  # noqa: PLC0415  (present only where the browser is)
    from selenium.webdriver.chrome.service import Service  # noqa: PLC0415

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--window-size={WIDTH},{HEIGHT}",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        # The viewport itself, not the window around it, is what a reader's screen shows.
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False},
        )
        driver.set_page_load_timeout(LOAD_TIMEOUT_S)
        yield driver
    finally:
        driver.quit()


def _first_screen(browser: WebDriver, html: Path, screenshot: Path) -> dict[str, Any]:
    from selenium.webdriver.support.wait import WebDriverWait  # noqa: PLC0415

    browser.get(html.resolve().as_uri())
    WebDriverWait(browser, LOAD_TIMEOUT_S).until(
        lambda driver: driver.execute_script(
            "return Array.from(document.images).every(i => i.complete)"
        )
    )
    measured: dict[str, Any] = browser.execute_script(_MEASURE)
    assert browser.save_screenshot(str(screenshot))
    return measured


def _assert_first_screen_shows_the_headline(measured: dict[str, Any], screenshot: Path) -> None:
    shown = json.dumps(measured, indent=1)
    assert (measured["innerWidth"], measured["innerHeight"]) == (WIDTH, HEIGHT), shown
    assert measured["found"] and measured["complete"], shown
    assert measured["naturalWidth"] > 0, shown  # the embedded PNG decoded
    assert measured["top"] >= 0 and measured["bottom"] <= HEIGHT, shown
    assert measured["left"] >= 0 and measured["right"] <= WIDTH, shown
    readable = min(MIN_FIGURE_WIDTH, MIN_FIGURE_SCALE * measured["naturalWidth"])
    assert measured["width"] >= readable, shown
    assert measured["scrollWidth"] <= WIDTH, shown  # no sideways scrolling
    assert measured["openDetails"] == 0, shown  # the run's facts start folded
    assert {"The run", "Trials", "Sample size"} <= set(measured["details"]), shown
    with Image.open(screenshot) as image:
        assert image.width == WIDTH


def test_the_first_screen_shows_the_headline_figure(
    browser: WebDriver, reported: tuple[Path, Path], tmp_path: Path
) -> None:
    study, _slow = reported
    screenshot = tmp_path / "first_screen.png"
    measured = _first_screen(browser, study / "report" / "report.html", screenshot)
    _assert_first_screen_shows_the_headline(measured, screenshot)


def _warn_of_everything(run_dir: Path) -> None:
    """A noisy, drifting baseline, lost samples, busy nodes, missing traces: more warnings than
    the first screen lists."""
    manifest_path = run_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    noisy = {"quiet": False, "spread_mw": 80.0, "drift_mw": -70.0, "bound_mw": 60.0}
    manifest |= {"idle_baseline": noisy, "idle_baseline_end": {**noisy, "change_mw": 90.0}}
    manifest_path.write_text(json.dumps(manifest))
    trials = run_dir / "trials.csv"
    with trials.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        if row["status"] == "ok":
            row |= {"samples_lost": "3", "client_other_cpu_pct": "50", "server_other_cpu_pct": "40"}
    with trials.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    for trial in ("t0001", "t0002", "t0004"):
        (run_dir / "power" / f"{trial}.npy").unlink()


def test_warnings_do_not_push_the_headline_off_the_first_screen(
    browser: WebDriver, run_copy: Path, tmp_path: Path
) -> None:
    _warn_of_everything(run_copy)
    files = write_report(load_run(run_copy))
    # Five listed, the rest (the meter's floor's among them) counted.
    assert re.search(r"\.\.\. and \d+ more in the sections below\.", files.markdown.read_text())
    screenshot = tmp_path / "first_screen_warned.png"
    measured = _first_screen(browser, files.html, screenshot)
    _assert_first_screen_shows_the_headline(measured, screenshot)


@pytest.mark.parametrize("workload", ["api", "payload", "stream", "blob"])
def test_each_workloads_first_screen_shows_its_headline_figure(
    browser: WebDriver, workload_reports: dict[str, Path], workload: str, tmp_path: Path
) -> None:
    screenshot = tmp_path / f"first_screen_{workload}.png"
    html = workload_reports[workload] / "report" / "report.html"
    _assert_first_screen_shows_the_headline(_first_screen(browser, html, screenshot), screenshot)


def test_an_h2_h3_runs_first_screen_shows_figure_1_and_h3_against_h2(
    browser: WebDriver, protocols_report: Path, tmp_path: Path
) -> None:
    """Issue 36's run: the headline figure on the first screen, and next after it the
    comparison the run was made for, heading and table."""
    screenshot = tmp_path / "first_screen_h2_h3.png"
    html = protocols_report / "report" / "report.html"
    measured = _first_screen(browser, html, screenshot)
    _assert_first_screen_shows_the_headline(measured, screenshot)
    table: dict[str, Any] = browser.execute_script(_COMPARISON)
    assert table["heading"] == "h3 against h2 (protocol)", table
    assert measured["bottom"] < table["headingTop"] < table["top"], table
    assert table["header"][:4] == ["metric", "initial_window_size", "h2 (reference)", "h3"], table


# The first table after the headline figure: the findings' first.
_COMPARISON = """
const heading = document.querySelector('figure.lead ~ h2');
const table = document.querySelector('figure.lead ~ div.table table');
const box = table ? table.getBoundingClientRect() : null;
return {
  heading: heading ? heading.textContent : null,
  headingTop: heading ? heading.getBoundingClientRect().top : null,
  top: box ? box.top : null,
  header: table ? Array.from(table.querySelectorAll('th')).map(th => th.textContent) : [],
};
"""
