"""What one frame costs: energy above idle and CPU time per trial as a linear model of the
trial's frames, bytes and duration, fitted on any run.

    y = b0 + b1 DATA + b2 WINDOW_UPDATE + b3 KiB + b4 ms [+ the workload's own counts]

y is a trial's `energy_above_idle_mj` (in uJ) or the client's CPU time (in us: `client_cpu_s`,
or `client_process_cpu_s` when the run's energy window is the whole trial process); DATA frames
received and WINDOW_UPDATE frames sent by the client (`client_data_frames`,
`client_window_update_frames`), KiB it received and sent, the energy window's duration in ms
(`window_s`), and each `<kind>_..._count` column of the workload. So b1 reads "a DATA frame
costs b1 uJ of energy (or us of CPU) on this node", b4 "a millisecond of waiting costs b4 uJ"
(the network's and the idle-but-awake node's share), b0 a trial's fixed cost (the connection,
the start-up in the process window).

Ordinary least squares over the ok rows, one fit per engine and device profile (a run has one
of each; `h2iot report A B` fits each run). Each coefficient has a two-sided Student-t interval
at the run's confidence with n - p degrees of freedom, from its standard error
sqrt(s^2 (X'X)^-1); the fit reports R^2, the residuals' sd and each trial's residual. A term
that does not vary in the run (bytes in a sweep of windows over one page) or that the other
terms already determine cannot be estimated: it is left out of the fit and named, not reported
as a number. Terms are strongly correlated in a window sweep (small windows mean many frames,
many updates and long trials at once), so the intervals are wide where the run cannot tell
them apart; a sweep that also varies the page size or the update policy separates them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from agent.engines import ENGINE_OF_UNNAMED_RUNS
from analysis.load import Run, workload_columns
from analysis.manifest import config_value
from analysis.stats import t_quantile_df

COLLINEAR = 0.95
DETERMINED = 1e-4  # a term whose variation the terms before it leave less of is left out


@dataclass(frozen=True)
class Term:
    name: str  # a name in the model ("intercept", a column, or "kib", "ms")
    label: str  # what one unit is: "per DATA frame"


INTERCEPT = Term("intercept", "per trial")
TERMS = (
    INTERCEPT,
    Term("client_data_frames", "per DATA frame"),
    Term("client_window_update_frames", "per WINDOW_UPDATE frame"),
    Term("kib", "per KiB received and sent"),
    Term("ms", "per ms of the window"),
)


@dataclass(frozen=True)
class Response:
    key: str  # as summary.csv names it: frame_model:<key>:<term>
    label: str
    unit: str


ENERGY = Response("energy_above_idle_uj", "energy above idle", "uJ")
CPU = Response("cpu_us", "client CPU time", "us")


@dataclass(frozen=True)
class Coefficient:
    term: Term
    estimate: float
    se: float
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class Fit:
    """One response's fit for one group of trials."""

    group: str  # "engine h2, device none"
    response: Response
    confidence: float
    n: int
    coefficients: tuple[Coefficient, ...]
    left_out: tuple[tuple[str, str], ...]  # (term, why) not estimated
    r2: float
    residual_sd: float
    residuals: pd.DataFrame = field(repr=False)  # trial_id, measured, predicted, residual
    # Pairs of kept terms that move together (|r| > COLLINEAR): their coefficients trade off.
    entangled: tuple[tuple[str, str, float], ...] = ()

    @property
    def df(self) -> int:
        return self.n - len(self.coefficients)


def _groups(run: Run) -> str:
    engine = config_value(run.manifest, "nodes.client.engine") or ENGINE_OF_UNNAMED_RUNS
    device = config_value(run.manifest, "nodes.client.device")
    profile = device.get("profile", "custom") if isinstance(device, dict) else "none"
    return f"engine {engine}, device {profile}"


def design(run: Run) -> tuple[pd.DataFrame, list[Term]]:
    """The model's columns per ok trial (trial_id first) and the terms they hold."""
    ok = run.ok
    table = pd.DataFrame({"trial_id": ok["trial_id"]})
    table["intercept"] = 1.0
    for name in ("client_data_frames", "client_window_update_frames"):
        table[name] = ok.get(name, math.nan)
    received = ok.get("client_bytes_received", math.nan)
    sent = ok["client_bytes_sent"].fillna(0.0) if "client_bytes_sent" in ok else 0.0
    table["kib"] = (received + sent) / 1024
    table["ms"] = ok["window_s"] * 1000 if "window_s" in ok else math.nan
    terms = list(TERMS)
    for column in workload_columns(run.manifest):
        if column.endswith("_count") and column in ok and ok[column].notna().any():
            table[column] = ok[column]
            terms.append(Term(column, f"per {column.removeprefix(run.workload + '_')}"))
    return table, terms


def responses(run: Run) -> dict[Response, pd.Series]:
    """The two responses per ok trial, in uJ and us."""
    process = run.manifest.get("energy_window") == "process"
    cpu = "client_process_cpu_s" if process and "client_process_cpu_s" in run.ok else "client_cpu_s"
    found: dict[Response, pd.Series] = {}
    if "energy_above_idle_mj" in run.ok:
        found[ENERGY] = run.ok["energy_above_idle_mj"] * 1e3
    if cpu in run.ok:
        found[CPU] = run.ok[cpu] * 1e6
    return found


def _identifiable(
    x: np.ndarray, names: Sequence[str], determined: float = DETERMINED
) -> tuple[list[int], list[tuple[str, str]]]:
    """Columns to keep, in order: drop those that do not vary (the intercept aside), then any
    that the kept ones (nearly) determine: a column whose part not explained by them is under
    `determined` of its own variation has no estimate worth the name (bytes in a window sweep
    are the page plus 9 per DATA frame and 13 per WINDOW_UPDATE, to within a few hundred)."""
    keep: list[int] = []
    left_out: list[tuple[str, str]] = []
    for index, name in enumerate(names):
        column = x[:, index]
        if name != INTERCEPT.name and np.ptp(column) == 0:
            left_out.append((name, "the same in every trial"))
            continue
        if keep:
            kept = x[:, keep]
            fitted = kept @ np.linalg.lstsq(kept, column, rcond=None)[0]
            spread = float(((column - column.mean()) ** 2).sum())
            unexplained = float(((column - fitted) ** 2).sum())
            if spread == 0 or unexplained <= determined * spread:
                share = 1 - unexplained / spread if spread else 1.0
                left_out.append(
                    (name, f"determined by the terms before it (they explain {share:.6f} of it)")
                )
                continue
        keep.append(index)
    return keep, left_out


def fit(
    trial_ids: pd.Series,
    x_table: pd.DataFrame,
    terms: Sequence[Term],
    y: pd.Series,
    *,
    confidence: float,
    group: str,
    response: Response,
    determined: float = DETERMINED,
) -> Fit | None:
    """OLS of y on the terms' columns of `x_table`; None with fewer trials than terms + 1.
    `determined`: a term left out when the terms before it explain all but this share of its
    variation (`_identifiable`)."""
    names = [t.name for t in terms]
    usable = x_table[names].notna().all(axis=1) & y.notna()
    x_all = x_table.loc[usable, names].to_numpy(dtype=np.float64)
    values = y[usable].to_numpy(dtype=np.float64)
    if len(values) == 0:
        return None
    keep, left_out = _identifiable(x_all, names, determined)
    n, p = len(values), len(keep)
    if n <= p or p == 0:
        return None
    x = x_all[:, keep]
    beta, *_ = np.linalg.lstsq(x, values, rcond=None)
    predicted = x @ beta
    residual = values - predicted
    rss = float(residual @ residual)
    s2 = rss / (n - p)
    covariance = s2 * np.linalg.pinv(x.T @ x)
    se = np.sqrt(np.clip(np.diag(covariance), 0.0, None))
    t = t_quantile_df(confidence, n - p)
    kept_terms = [terms[i] for i in keep]
    coefficients = tuple(
        Coefficient(term, float(b), float(e), float(b - t * e), float(b + t * e))
        for term, b, e in zip(kept_terms, beta, se, strict=True)
    )
    total = float(((values - values.mean()) ** 2).sum())
    entangled = tuple(
        (kept_terms[i].name, kept_terms[j].name, float(r))
        for i, j, r in _correlated(x, COLLINEAR)
        if kept_terms[i] is not INTERCEPT
    )
    residuals = pd.DataFrame(
        {
            "trial_id": trial_ids[usable].to_numpy(),
            "measured": values,
            "predicted": predicted,
            "residual": residual,
        }
    )
    return Fit(
        group=group,
        response=response,
        confidence=confidence,
        n=n,
        coefficients=coefficients,
        left_out=tuple(left_out),
        r2=1 - rss / total if total > 0 else math.nan,
        residual_sd=math.sqrt(s2),
        residuals=residuals,
        entangled=entangled,
    )


def _correlated(x: np.ndarray, limit: float) -> list[tuple[int, int, float]]:
    """(i, j, r) for the columns of x (constant ones aside) whose correlation exceeds limit."""
    varying = [i for i in range(x.shape[1]) if np.ptp(x[:, i]) > 0]
    if len(varying) < 2:
        return []
    r = np.corrcoef(x[:, varying], rowvar=False)
    return [
        (varying[a], varying[b], float(r[a, b]))
        for a in range(len(varying))
        for b in range(a + 1, len(varying))
        if abs(r[a, b]) > limit
    ]


def fit_run(run: Run) -> list[Fit]:
    """The energy and CPU fits of a run (none where it lacks the columns or the trials)."""
    if run.ok.empty:
        return []
    x_table, terms = design(run)
    found = []
    for response, y in responses(run).items():
        result = fit(
            run.ok["trial_id"],
            x_table,
            terms,
            y,
            confidence=run.confidence,
            group=_groups(run),
            response=response,
        )
        if result is not None:
            found.append(result)
    return found


def summary_rows(
    fits: Sequence[Fit], axes: Sequence[str], prefix: str = "frame_model"
) -> pd.DataFrame:
    """summary.csv rows, one per coefficient: metric `<prefix>:<response>:<term>`, the
    estimate as `mean`, its standard error as `sd`, its CI; the swept settings empty."""
    rows = [
        {
            "metric": f"{prefix}:{f.response.key}:{c.term.name}",
            **dict.fromkeys(axes),
            "n": f.n,
            "mean": c.estimate,
            "sd": c.se,
            "ci_low": c.ci_low,
            "ci_high": c.ci_high,
            "confidence": f.confidence,
        }
        for f in fits
        for c in f.coefficients
    ]
    return pd.DataFrame(rows)
