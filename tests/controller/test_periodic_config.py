"""configs/periodic.toml, periodic-rpi3b.toml and periodic-nghttp2.toml: they load, sweep h2 and
h3 x the three connection policies with issue 37's local default, the Pi's differs by its device
profile and link only, and the C reference client's makes the same reports over h3."""

from __future__ import annotations

from pathlib import Path

from controller.config import load_config

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_the_periodic_sweep_loads_with_the_local_default() -> None:
    config = load_config(CONFIGS / "periodic.toml")
    assert config.workload.kind == "periodic"
    axes = dict(config.sweep.axes)
    assert axes["protocol"] == ("h2", "h3")
    assert axes["connection"] == ("keep", "new", "resume")
    params = dict(config.workload.params)
    assert (params["count"], params["interval_s"], params["response_bytes"]) == (20, 1.0, 1024)
    assert params["method"] == "GET"
    assert config.meter.source == "virtual"
    assert len(config.sweep.points()) == 6


def test_the_emulated_pi_runs_the_same_sweep_on_its_profile() -> None:
    local, pi = (load_config(CONFIGS / name) for name in ("periodic.toml", "periodic-rpi3b.toml"))
    assert pi.sweep == local.sweep and pi.workload == local.workload
    for node in (pi.client, pi.server):
        assert node.device is not None and node.device.profile == "rpi3b"
    assert (pi.link.rate_mbit, pi.link.delay_ms, pi.link.delay_method) == (100, 0.5, "relay")


def test_the_c_reference_client_makes_the_same_reports_over_h3() -> None:
    local, c_engine = (
        load_config(CONFIGS / name) for name in ("periodic.toml", "periodic-nghttp2.toml")
    )
    assert c_engine.workload == local.workload
    assert dict(c_engine.sweep.axes) == {"protocol": ("h3",), "connection": ("new", "resume")}
    assert c_engine.client.engine == "nghttp2" and c_engine.server.engine == local.server.engine
