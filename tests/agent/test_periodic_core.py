"""The periodic workload's pure parts: its declaration (params, the refusal of resume over
h2c), the schedule (seeded, never before the start, lateness), the metrics summed from the
exchanges, an exchange's handshake and early-data verdict, the server ledger's lingering trials
across connections, and a trial session's counts over its connections."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent import probe
from agent.client.connect import Target
from agent.client.trial import Connected, TrialSession
from agent.errors import FetchError, UsageError
from agent.server.ledger import Note, TrialLedger, TrialRecord
from agent.traffic import FrameCounts
from agent.workloads import spec_of
from agent.workloads.params import parse_params
from agent.workloads.periodic import record as periodic_record
from agent.workloads.periodic.record import Exchange, Keepalive, metrics
from agent.workloads.periodic.schedule import LATE_S, Schedule, lateness_s
from agent.workloads.periodic.spec import EXCHANGE_KEYS, PERIODIC

_NS = 1_000_000_000


def test_the_spec_is_registered_with_the_contract_params() -> None:
    assert spec_of("periodic") is PERIODIC
    assert PERIODIC.param_names == (
        "count",
        "interval_s",
        "method",
        "request_bytes",
        "response_bytes",
        "jitter_s",
        "connection",
        "keepalive",
        "keepalive_s",
    )
    assert PERIODIC.defaults()["count"] == 20
    assert PERIODIC.protocols == ("h2c", "h2", "h3")


@pytest.mark.parametrize(
    ("option", "said"),
    [
        ("count=0", "count: 0 is outside 1..100000"),
        ("connection=reuse", 'connection: expected one of "keep", "new", "resume"'),
        ("keepalive_s=0", "keepalive_s: 0.0 is outside 0.001..86400"),
        ("jitter_s=-1", "jitter_s: -1.0 is outside 0..86400"),
    ],
)
def test_bad_params_are_refused_naming_the_param(option: str, said: str) -> None:
    with pytest.raises(UsageError, match=said.replace(".", r"\.")):
        parse_params(PERIODIC, [option], "client")


def test_resume_is_refused_over_h2c_alone() -> None:
    refused = PERIODIC.refusal({"connection": "resume"}, "h2c")
    assert refused is not None
    assert refused.message("h2c") == (
        'connection = "resume" does not run over h2c: no TLS, no session to resume'
    )
    for protocol in ("h2", "h3"):
        assert PERIODIC.refusal({"connection": "resume"}, protocol) is None
    assert PERIODIC.refusal({"connection": "keep"}, "h2c") is None


@given(
    count=st.integers(1, 200),
    interval_s=st.floats(0, 100),
    jitter_s=st.floats(0, 100),
    seed=st.text(max_size=8),
)
def test_the_schedule_starts_at_zero_never_goes_before_it_and_repeats_per_seed(
    count: int, interval_s: float, jitter_s: float, seed: str
) -> None:
    schedule = Schedule(count, interval_s, jitter_s)
    due = schedule.due_ns(seed)
    assert len(due) == count
    assert due[0] == 0
    assert all(d >= 0 for d in due)
    assert schedule.due_ns(seed) == due
    assert list(due) == sorted(due)
    assert due[-1] <= ((count - 1) * interval_s + jitter_s) * _NS + 1
    if jitter_s * 2 < interval_s:  # no move passes the next exchange's: each keeps its place
        for index, at in enumerate(due):
            assert abs(at - index * interval_s * _NS) <= jitter_s * _NS + 1


@given(count=st.integers(1, 100), interval_s=st.floats(0, 1000))
def test_without_jitter_exchanges_are_due_every_interval(count: int, interval_s: float) -> None:
    due = Schedule(count, interval_s).due_ns("t")
    assert due == tuple(round(i * interval_s * _NS) for i in range(count))


def test_lateness_is_the_start_after_its_due_time_and_never_negative() -> None:
    assert lateness_s(10 * _NS, 12 * _NS) == 2.0
    assert lateness_s(10 * _NS, 9 * _NS) == 0.0


def _exchange(index: int, **changes: object) -> Exchange:
    fields: dict[str, object] = {
        "index": index,
        "scheduled_mono_ns": index * _NS,
        "start_mono_ns": index * _NS,
        "connected_mono_ns": None,
        "request_mono_ns": index * _NS,
        "response_end_mono_ns": index * _NS + 1000,
        "lateness_s": 0.0,
        "handshake": "kept",
        "early_data_sent": False,
        "early_data_accepted": None,
        "connect_s": None,
        "connect_cpu_s": None,
        "response_s": 1e-6,
        "wire_bytes_sent": 100,
        "wire_bytes_received": 1100,
        "ok": True,
        "error": None,
    }
    fields.update(changes)
    return Exchange(**fields)  # type: ignore[arg-type]


def test_an_exchange_has_exactly_the_contract_keys() -> None:
    assert tuple(_exchange(0).to_dict()) == EXCHANGE_KEYS


def test_metrics_are_exactly_the_spec_fields_summed_from_the_exchanges() -> None:
    exchanges = [
        _exchange(0, handshake="full", connect_s=0.02, connect_cpu_s=0.01),
        _exchange(1, lateness_s=LATE_S / 2),
        _exchange(2, handshake="full", connect_s=0.04, connect_cpu_s=0.03, lateness_s=0.5),
        _exchange(
            3,
            handshake="0rtt",
            connect_s=0.01,
            connect_cpu_s=0.005,
            early_data_sent=True,
            early_data_accepted=True,
        ),
        _exchange(
            4,
            handshake="resumed",
            connect_s=0.01,
            connect_cpu_s=0.005,
            early_data_sent=True,
            early_data_accepted=False,
        ),
        _exchange(5, ok=False, error="reset", response_s=None, response_end_mono_ns=None),
    ]
    figures = metrics(exchanges, reconnects=1, keepalive=Keepalive(3, 150))
    assert tuple(figures) == tuple(field.name for field in PERIODIC.fields)
    assert figures["exchanges_ok"] == 5
    assert figures["exchanges_failed"] == 1
    assert figures["handshakes_full"] == 2
    assert figures["handshakes_resumed"] == 2
    assert figures["handshakes_0rtt"] == 1
    assert (figures["early_data_sent"], figures["early_data_accepted"]) == (2, 1)
    assert figures["early_data_refused"] == 1
    assert figures["reconnects"] == 1
    assert figures["late_exchanges"] == 1  # below LATE_S is the event loop's slack
    assert figures["lateness_max_s"] == 0.5
    assert figures["connect_mean_s"] == pytest.approx(0.02)
    assert figures["connect_cpu_mean_s"] == pytest.approx(0.0125)
    assert figures["response_mean_s"] == pytest.approx(1e-6)
    assert figures["wire_mean_bytes"] == 1200
    assert (figures["keepalive_pings"], figures["keepalive_bytes"]) == (3, 150)


def test_no_exchange_leaves_means_unset() -> None:
    figures = metrics([], reconnects=0, keepalive=Keepalive())
    assert figures["connect_mean_s"] is None
    assert figures["lateness_max_s"] is None
    assert figures["wire_mean_bytes"] is None


def _detach(ledger: TrialLedger, trial_id: str, connection: int) -> TrialRecord | None:
    empty = FrameCounts.empty()
    return ledger.detach(trial_id, connection, empty, empty, 0)


def _request(ledger: TrialLedger, trial_id: str, connection: int) -> None:
    """As the server's app takes a tagged request: the trial's first opens it."""
    if not ledger.is_open(trial_id):
        ledger.open(trial_id, probe.sample())
    ledger.request(trial_id, connection)


def test_a_trial_that_continues_lingers_across_connections_then_closes_once() -> None:
    ledger = TrialLedger("periodic")
    for connection in (1, 2):
        _request(ledger, "t", connection)
        ledger.note("t", Note.CONTINUES)
        ledger.note("t", Note.RESUMED)
        assert _detach(ledger, "t", connection) is None
        assert ledger.lingering() == ("t",)
    _request(ledger, "t", 3)
    ledger.note("t", Note.EARLY_ACCEPTED)
    record = _detach(ledger, "t", 3)
    assert record is not None
    assert record.requests == 3
    assert record.handshakes_resumed == 2
    assert record.early_data_accepted == 1
    assert ledger.lingering() == ()


def test_a_lingering_trial_closes_when_another_begins() -> None:
    ledger = TrialLedger("periodic")
    _request(ledger, "gave-up", 1)
    ledger.note("gave-up", Note.CONTINUES)
    assert _detach(ledger, "gave-up", 1) is None
    records = ledger.close_lingering(0)
    assert [r.trial_id for r in records] == ["gave-up"]
    assert not ledger.is_open("gave-up")


@given(new=st.booleans(), resumed=st.booleans(), early=st.booleans())
def test_an_exchanges_handshake_says_how_its_connection_began(
    new: bool, resumed: bool, early: bool
) -> None:
    handshake = periodic_record.handshake_of(new, resumed, early)
    assert (handshake == "kept") == (not new)
    assert (handshake in ("resumed", "0rtt")) == (new and resumed)
    assert (handshake == "0rtt") == (new and resumed and early)


@given(taken=st.booleans(), status=st.sampled_from([200, 404, 425, 500]))
def test_early_data_is_accepted_when_taken_and_not_answered_too_early(
    taken: bool, status: int
) -> None:
    assert periodic_record.early_accepted(False, taken, status) is None
    assert periodic_record.early_accepted(True, taken, status) is (taken and status != 425)


class _Counted:
    """A connection stand-in that sent and received `n` bytes."""

    def __init__(self, n: int) -> None:
        self.n = n

    def session_ticket(self) -> None:
        return None

    async def close(self) -> None:
        pass

    def sent_counts(self) -> dict[str, object]:
        return FrameCounts({}, {}, self.n).to_dict()

    received_counts = sent_counts

    def transport_record(self) -> dict[str, object]:
        """As a QUIC connection's, one packet lost per 10 bytes."""
        return {"protocol": "h3", "packets_lost": self.n // 10}


class _FailingOnce:
    """A connector whose first connect fails, then gives connections of 10 bytes."""

    def __init__(self) -> None:
        self.tries = 0

    async def open(self, offer: object, early: object) -> tuple[_Counted, Connected]:
        self.tries += 1
        if self.tries == 1:
            raise FetchError("cannot connect")
        return _Counted(10), Connected(0, 1, 1e-9, 0.0)


def test_a_trials_counts_are_each_connections_once_a_failed_connect_included() -> None:
    async def trial() -> tuple[dict[str, object], dict[str, object] | None]:
        session = TrialSession(
            _Counted(100),  # type: ignore[arg-type]
            Target.parse("http://127.0.0.1:1/"),
            "t",
            connector=_FailingOnce(),  # type: ignore[arg-type]
        )
        with pytest.raises(FetchError):
            await session.reconnect()
        assert session.sent_counts()["bytes"] == 100  # the closed one, current still
        assert session.transport_record() == {
            "protocol": "h3",
            "packets_lost": 10,
            "connections": 1,
        }
        await session.reconnect()
        return session.sent_counts(), session.transport_record()

    sent, transport = asyncio.run(trial())
    assert sent["bytes"] == 110
    # The transport's counts too: each connection's once, over both.
    assert transport == {"protocol": "h3", "packets_lost": 11, "connections": 2}
