"""The server's per-trial accounting (agent.server.ledger), sans-IO: a trial's span starts at the
sample taken when it opens, whatever its later requests, connections and neighbours do."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent.probe import ProbeSample
from agent.server.ledger import Note, TrialLedger
from agent.traffic import FrameCounts


def _at(ns: int) -> ProbeSample:
    return ProbeSample(t_mono_ns=ns, t_wall_ns=ns, cpu_user_s=ns / 1e9, cpu_sys_s=0.0)


# A trial's requests, each on one of a few connections.
_requests = st.lists(st.integers(0, 3), min_size=1, max_size=20)


@given(requests=_requests, done=st.integers(0, 20))
def test_a_trial_counts_every_request_from_one_opening_sample(
    requests: list[int], done: int
) -> None:
    ledger = TrialLedger("page")
    ledger.open("t1", _at(1_000), rss_reset=True)
    for connection in requests:
        ledger.request("t1", connection)
    for index in range(done):
        ledger.response_done("t1", _at(2_000 + index))
    records = [
        ledger.detach("t1", c, FrameCounts.empty(), FrameCounts.empty(), 1)
        for c in dict.fromkeys(requests)
    ]
    *pending, record = records
    assert pending == [None] * len(pending)  # the trial ends with its last connection
    assert record is not None and not ledger.is_open("t1")
    assert record.requests == len(requests) and record.responses_completed == done
    assert record.ok == (done == len(requests))
    assert record.t_mono_start_ns == 1_000
    assert record.t_mono_end_ns == (2_000 + done - 1 if done else 1_000)
    assert record.rss_peak_is_trial


def test_trials_open_together_overlap_and_lose_their_own_peak() -> None:
    ledger = TrialLedger("page")
    ledger.open("t1", _at(1), rss_reset=True)
    ledger.request("t1", 1)
    ledger.open("t2", _at(2))
    ledger.request("t2", 2)
    assert ledger.open_trials == ("t1", "t2")
    first = ledger.detach("t1", 1, FrameCounts.empty(), FrameCounts.empty(), 1)
    second = ledger.detach("t2", 2, FrameCounts.empty(), FrameCounts.empty(), 1)
    assert first is not None and second is not None
    assert first.overlapping_trials == ("t2",) and second.overlapping_trials == ("t1",)
    assert not first.rss_peak_is_trial and second.t_mono_start_ns == 2


def test_a_trial_bracketed_by_control_spans_its_connections_until_its_end() -> None:
    # A client that sends no trial header (gtlsclient, a process per exchange): each request is
    # counted as continuing, so the trial outlives each connection until the client's `end`.
    ledger = TrialLedger("periodic")
    ledger.open("t1", _at(1))
    for connection in (1, 2):
        ledger.request("t1", connection)
        ledger.note("t1", Note.CONTINUES)
        ledger.response_done("t1", _at(10 * connection))
        assert ledger.detach("t1", connection, FrameCounts.empty(), FrameCounts.empty(), 1) is None
    assert ledger.lingering() == ("t1",)
    record = ledger.end("t1", 1)
    assert record is not None and not ledger.is_open("t1")
    assert (record.requests, record.responses_completed, record.ok) == (2, 2, True)
    assert record.t_mono_end_ns == 20
    assert ledger.end("t1", 1) is None  # ended already: nothing twice
    assert ledger.end("never", 1) is None  # bracketed, but no request came


def test_a_trial_ended_while_a_connection_carries_it_closes_with_that_connection() -> None:
    ledger = TrialLedger("periodic")
    ledger.open("t1", _at(1))
    ledger.request("t1", 1)
    ledger.note("t1", Note.CONTINUES)
    assert ledger.end("t1", 1) is None  # the close has not been read yet
    record = ledger.detach("t1", 1, FrameCounts.empty(), FrameCounts.empty(), 1)
    assert record is not None and record.requests == 1
