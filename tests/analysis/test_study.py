from __future__ import annotations

import math

import pandas as pd
import pytest

from analysis.study import Check, increase, knee, magnitude, percent, study_checks

WINDOWS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65535)


def _table(means: dict[str, list[float]], sd: float = 0.0, n: int = 10) -> pd.DataFrame:
    rows = []
    for metric, values in means.items():
        for window, mean in zip(WINDOWS, values, strict=True):
            half = 1.833 * sd / math.sqrt(n)
            rows.append(
                {
                    "metric": metric,
                    "initial_window_size": window,
                    "n": n,
                    "mean": mean,
                    "sd": sd,
                    "ci_low": mean - half,
                    "ci_high": mean + half,
                    "confidence": 0.90,
                }
            )
    return pd.DataFrame(rows)


STUDY_LIKE = {
    "client_response_s": [40, 20, 10, 5, 2.5, 1.4, 0.9, 0.68, 0.627],
    "client_cpu_s": [5, 2.5, 1.3, 0.8, 0.53, 0.45, 0.41, 0.39, 0.375],
    "server_cpu_s": [3, 2, 1, 0.8, 0.6, 0.5, 0.45, 0.43, 0.427],
    "server_serve_s": [40, 20, 10, 5, 2.5, 1.4, 0.9, 0.7, 0.627],
    "energy_mj": [900, 500, 300, 160, 122, 121, 119, 120, 120],
    "energy_above_idle_mj": [500, 300, 200, 100, 60, 61, 59, 60, 60],
    "client_cpu_pct": [21, 21, 21.5, 21, 21, 32, 45, 55, 60],
    "server_cpu_pct": [10, 10, 10, 10, 10, 14, 18, 22, 26],
}


def _by_finding(checks: list[Check]) -> dict[str, Check]:
    return {c.finding: c for c in checks}


def test_a_run_shaped_like_the_study_agrees_everywhere() -> None:
    checks = _by_finding(study_checks(_table(STUDY_LIKE, sd=0.001), ["initial_window_size"], 0.9))
    verdicts = {finding: c.verdict for finding, c in checks.items()}
    assert verdicts == {
        "client response time falls as the window grows": "agrees",
        "knee of the client response time": "info",
        "client response time at 4096 vs 65535": "agrees",
        "client CPU time falls as the window grows": "agrees",
        "client CPU time at 4096 vs 65535": "agrees",
        "server CPU time at 65535": "info",
        "server response time at 65535": "info",
        "client energy settles from 4096 up": "agrees",
        "client energy above idle settles from 4096 up": "agrees",
        "client CPU % flat up to 4096, then rising": "agrees",
        "server CPU % flat up to 4096, then rising": "agrees",
    }
    assert checks["client response time at 4096 vs 65535"].measured.startswith("+299 %")
    assert checks["client CPU time at 4096 vs 65535"].measured.startswith("+41 %")
    assert checks["client CPU time at 4096 vs 65535"].study == "+42 %"
    assert checks["server CPU time at 65535"].measured.startswith("427 ms")
    assert checks["knee of the client response time"].measured.startswith("32768 B")


def test_an_emulated_nodes_cpu_pct_is_judged_against_its_emulated_core() -> None:
    # A Pi-like node on a host 10x as fast: its CPU % of the host is a tenth of the study's.
    emulated = {**STUDY_LIKE, "client_cpu_pct": [v / 10 for v in STUDY_LIKE["client_cpu_pct"]]}
    table = _table(emulated, sd=0.001)
    plain = _by_finding(study_checks(table, ["initial_window_size"], 0.9))
    scaled = _by_finding(
        study_checks(table, ["initial_window_size"], 0.9, core_fractions={"client": 0.1})
    )
    finding = "client CPU % flat up to 4096, then rising"
    assert plain[finding].measured.startswith("2 .. 2 % up to 4096")
    assert scaled[finding].measured.startswith(
        "of the emulated core (quota 0.1): 21 .. 21 % up to 4096 (spread 2 %), 60 % at 65535"
    )
    assert scaled[finding].verdict == plain[finding].verdict == "agrees"
    server = "server CPU % flat up to 4096, then rising"
    assert scaled[server] == plain[server]  # the server is its own hardware here


def test_a_contrary_run_differs() -> None:
    flat = {metric: list(reversed(values)) for metric, values in STUDY_LIKE.items()}
    checks = _by_finding(study_checks(_table(flat, sd=0.001), ["initial_window_size"], 0.9))
    assert checks["client response time falls as the window grows"].verdict == "differs"
    assert checks["client CPU time at 4096 vs 65535"].verdict == "differs"
    assert checks["client energy settles from 4096 up"].verdict == "differs"
    assert checks["client CPU % flat up to 4096, then rising"].verdict == "differs"


def test_an_increase_within_the_noise_does_not_hold() -> None:
    noisy = dict(STUDY_LIKE)
    noisy["client_cpu_s"] = [0.40] * 4 + [0.41] + [0.40] * 4
    checks = _by_finding(study_checks(_table(noisy, sd=0.1, n=5), ["initial_window_size"], 0.9))
    check = checks["client CPU time at 4096 vs 65535"]
    assert check.verdict == "differs" and "CI -" in check.measured
    assert check.measured.endswith("no clear change where the study found +42 %")


def test_an_increase_is_judged_on_its_size_as_well_as_its_direction() -> None:
    """The issue's case: the study has +42 % for the client's CPU time, the run +297 %."""
    low = pd.Series({"n": 5, "mean": 3.97, "sd": 0.2})
    high = pd.Series({"n": 5, "mean": 1.0, "sd": 0.05})
    verdict, text = magnitude(increase(low, high, 0.9), 0.42)
    assert verdict == "same direction"
    assert text == "same direction, 7.1x the study's effect"
    near = magnitude(increase(pd.Series({"n": 5, "mean": 1.45, "sd": 0.05}), high, 0.9), 0.42)
    assert near[0] == "agrees"
    opposite = magnitude(increase(pd.Series({"n": 5, "mean": 0.5, "sd": 0.01}), high, 0.9), 0.42)
    assert opposite[0] == "differs" and opposite[1].startswith("opposite direction")
    nothing = magnitude(increase(pd.Series({"n": 5, "mean": 1.0, "sd": 0.01}), high, 0.9), 3.0)
    assert nothing == ("differs", "no clear change where the study found +300 %")


def test_with_five_trials_a_side_the_interval_is_students_not_the_normals() -> None:
    """n = 5 per point (the embedded default): t(df) is wider than z, so the old z-based
    interval excluded zero too readily."""
    low = pd.Series({"n": 5, "mean": 1.2, "sd": 0.2})
    high = pd.Series({"n": 5, "mean": 1.0, "sd": 0.2})
    change = increase(low, high, 0.90)
    assert 7.0 < change.df < 8.0
    z_half = 1.6448536 * math.sqrt(0.04 / (5 * 1.44) + 0.04 / 5)
    assert math.log(1.2) - math.log(1 + change.ci_low) > z_half


def test_missing_windows_and_axes_give_n_a() -> None:
    table = _table(STUDY_LIKE)
    partial = table[table["initial_window_size"] < 4096]
    checks = _by_finding(study_checks(partial, ["initial_window_size"], 0.9))
    assert checks["client CPU time at 4096 vs 65535"].verdict == "n/a"
    assert checks["server CPU time at 65535"].verdict == "n/a"
    (only,) = study_checks(table.rename(columns={"initial_window_size": "x"}), ["x"], 0.9)
    assert only.verdict == "n/a"


def test_other_axes_get_a_check_per_series() -> None:
    one = _table(STUDY_LIKE).assign(max_concurrent_streams=1)
    many = _table(STUDY_LIKE).assign(max_concurrent_streams=100)
    checks = study_checks(
        pd.concat([one, many]), ["initial_window_size", "max_concurrent_streams"], 0.9
    )
    series = {c.series for c in checks}
    assert series == {"max_concurrent_streams = 1", "max_concurrent_streams = 100"}


def test_knee_and_increase_by_hand() -> None:
    assert knee([1, 2, 4, 8], [10.0, 5.0, 1.05, 1.0], 0.10) == 4
    assert knee([1, 2, 4, 8], [1.0, 1.0, 1.0, 1.0], 0.10) == 1
    assert knee([1, 2, 4], [1.0, 5.0, 1.0], 0.10) == 4
    assert knee([], [], 0.10) is None
    low = pd.Series({"n": 10, "mean": 4.0, "sd": 0.4})
    high = pd.Series({"n": 10, "mean": 1.0, "sd": 0.1})
    change = increase(low, high, 0.90)
    assert change.relative == 3.0
    # delta method on log(m1 / m2): var = 0.4^2 / (10 x 4^2) + 0.1^2 / (10 x 1^2) = 0.002;
    # Welch-Satterthwaite df = 0.002^2 / (0.001^2 / 9 + 0.001^2 / 9) = 18; t(18, 0.95) = 1.734064
    assert change.df == pytest.approx(18.0)
    half = 1.734064 * math.sqrt(0.002)
    expected = (4 * math.exp(-half) - 1, 4 * math.exp(half) - 1)
    assert (change.ci_low, change.ci_high) == pytest.approx(expected, rel=1e-6)
    assert change.holds
    assert change.text() == "+300 % (90 % CI +270 % .. +332 %; t, Welch df 18.0)"
    assert percent(-0.001) == "+0 %" and percent(0.42) == "+42 %"


def test_a_run_of_4096_and_65535_alone_judges_the_cpu_pct_rise_but_not_flatness() -> None:
    """Issue 36: such a run has both windows, yet its CPU % rows said it needed them; what it
    lacks is a second window up to 4096 to judge flatness by."""
    both = _table(STUDY_LIKE, sd=0.001)
    both = both[both["initial_window_size"].isin([4096, 65535])]
    checks = _by_finding(study_checks(both, ["initial_window_size"], 0.9))
    client = checks["client CPU % flat up to 4096, then rising"]
    assert client.verdict == "n/a"
    assert client.measured.startswith("21 % at 4096, 60 % at 65535 (+186 %")
    assert client.measured.endswith(
        "flat not judged: it needs two windows up to 4096, the run has one"
    )
    assert client.resolvability is not None
    falling = both.copy()
    pct = falling["metric"] == "server_cpu_pct"
    falling.loc[pct, "mean"] = falling.loc[pct, "mean"].to_numpy()[::-1]
    server = _by_finding(study_checks(falling, ["initial_window_size"], 0.9))
    assert server["server CPU % flat up to 4096, then rising"].verdict == "differs"


def test_a_run_without_65535_says_which_windows_cpu_pct_needs() -> None:
    short = _table(STUDY_LIKE, sd=0.001)
    short = short[short["initial_window_size"] <= 8192]
    check = _by_finding(study_checks(short, ["initial_window_size"], 0.9))
    assert check["client CPU % flat up to 4096, then rising"].measured == (
        "needs windows 4096 and 65535"
    )
