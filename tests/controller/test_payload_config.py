"""configs/payload.toml: it loads, sweeps every encoding against the matrix side, and its
workload keys are the payload workload's."""

from __future__ import annotations

from pathlib import Path

from agent.workloads.payload.spec import ENCODING_NAMES
from controller.config import load_config

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "payload.toml"


def test_the_payload_sweep_loads() -> None:
    config = load_config(CONFIG)
    assert config.workload.kind == "payload"
    axes = dict(config.sweep.axes)
    assert axes["encoding"] == ENCODING_NAMES
    assert axes["matrix_side"] == (8, 32, 128, 256)
    params = dict(config.workload.params)
    assert (params["data"], params["messages"]) == ("matrix", 5)
    assert len(config.sweep.points()) == len(ENCODING_NAMES) * 4


def test_the_struct_arrays_are_a_key_away() -> None:
    config = load_config(
        CONFIG,
        ('workload.data="structs"', "sweep.record_count=[10, 1000]", "sweep.matrix_side=[1]"),
    )
    assert dict(config.workload.params)["data"] == "structs"
    assert dict(config.sweep.axes)["record_count"] == (10, 1000)
