"""The sweep plan's refusal, by its public message."""

from __future__ import annotations

import pytest

from controller.sweep.plan import plan_trials
from tests.controller.test_engine import windows


@pytest.mark.parametrize("repetitions", [0, -3])
def test_fewer_than_one_repetition_is_refused_by_name(repetitions: int):
    with pytest.raises(ValueError) as caught:
        plan_trials(windows(256), repetitions, "sequential", 1)
    assert str(caught.value) == f"repetitions must be at least 1, not {repetitions}"
