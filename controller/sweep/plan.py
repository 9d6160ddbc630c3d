"""Which trials a sweep runs, and in what order. Pure.

Every grid point is repeated `repetitions` times. In the default `randomized-blocked` order each
block holds every grid point once, shuffled with a seeded generator, so slow drift (temperature,
battery, background load) spreads evenly over the points instead of masquerading as an effect of
the setting; `sequential` runs each point's repetitions back to back, as the study did.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from controller.config.model import Config, Order, TrialPoint


@dataclass(frozen=True)
class PlannedTrial:
    trial_id: str
    index: int  # position in the run, from 0
    block: int  # randomized-blocked: the repetition's block; sequential: the point's index
    repetition: int  # from 1
    point: TrialPoint  # its repetitions share it: built once per grid point
    # A breakdown search's trial: (group, probe), each from 1 (controller.sweep.search_run).
    probe: tuple[int, int] | None = None


def plan_sweep(config: Config) -> list[PlannedTrial]:
    """A grid sweep's trials: every point of the config's grid, as its run section orders."""
    run = config.run
    return plan_trials(config.trial_points(), run.repetitions, run.order, run.seed)


def plan_trials(
    points: Sequence[TrialPoint], repetitions: int, order: Order, seed: int
) -> list[PlannedTrial]:
    if repetitions < 1:
        raise ValueError(f"repetitions must be at least 1, not {repetitions}")
    width = len(str(len(points) * repetitions))
    sequence: list[tuple[int, int, TrialPoint]] = []
    if order == "sequential":
        for point_index, point in enumerate(points):
            sequence.extend((point_index, rep, point) for rep in range(1, repetitions + 1))
    else:
        rng = random.Random(seed)
        for rep in range(1, repetitions + 1):
            block = list(points)
            rng.shuffle(block)
            sequence.extend((rep - 1, rep, point) for point in block)
    return [
        PlannedTrial(f"t{index + 1:0{width}d}", index, block, rep, point)
        for index, (block, rep, point) in enumerate(sequence)
    ]
