"""The report's first screen warns when HTTP/3 is set beside cleartext HTTP/2 (analysis.caveats):
h3 always pays for TLS, h2c never does."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from analysis.caveats import caveats
from analysis.load import Run


def _run(protocols: list[str]) -> Run:
    ok = pd.DataFrame({"trial_id": [f"t{i}" for i in range(len(protocols))], "protocol": protocols})
    failed = pd.DataFrame({"trial_id": [], "attempt": [], "error": []})
    return Run(Path("run"), {}, ("protocol",), ok, len(protocols), failed)


@pytest.mark.parametrize(
    ("protocols", "advice"),
    [(["h2c", "h3"], "sweep h2 (TLS)"), (["h2c", "h2", "h3"], "compare h3 with h2 (TLS) in this")],
)
def test_h3_beside_h2c_is_a_caveat_naming_the_fair_comparison(
    protocols: list[str], advice: str
) -> None:
    (line,) = [c for c in caveats(_run(protocols)) if "h3 is set beside h2c" in c]
    assert advice in line


@pytest.mark.parametrize("protocols", [["h2", "h3"], ["h2c", "h2"], ["h3"]])
def test_a_fair_or_http2_only_run_has_no_protocol_caveat(protocols: list[str]) -> None:
    assert not [c for c in caveats(_run(protocols)) if "h3" in c]
