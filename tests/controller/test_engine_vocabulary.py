"""The engine vocabulary is declared once (agent.engines) and both sides of the process boundary
read it: the agent's --engine choices, the config's engine keys, and what each engine can
announce, refused alike by the agent and at config load."""

from __future__ import annotations

import argparse

import pytest

from agent.commands.common import add_engine_options
from agent.engines import ENGINE_SPECS, ENGINES, SERVER_ONLY_ENGINES
from agent.errors import UsageError
from agent.h2.settings import SETTING_SPECS
from agent.nghttp2.options import NghttpdOptions, NghttpOptions
from controller.config import load_config
from controller.errors import ConfigError


def test_the_agent_offers_exactly_the_engines_the_config_takes() -> None:
    parser = argparse.ArgumentParser()
    add_engine_options(parser)
    (engine,) = [a for a in parser._actions if a.dest == "engine"]
    assert tuple(engine.choices or ()) == ENGINES
    for name in ENGINES:
        overrides = [f'nodes.server.engine="{name}"']
        if name in SERVER_ONLY_ENGINES:
            overrides += ['workload.kind="api"', "sweep={users=[4]}"]
        assert load_config(None, overrides).server.engine == name


@pytest.mark.parametrize("setting", sorted(SETTING_SPECS))
def test_nghttp2_refuses_a_setting_on_both_sides_alike(setting: str) -> None:
    spec = ENGINE_SPECS["nghttp2"]
    for client, create in (
        (True, lambda s: NghttpOptions.create(s, 65535, "map")),
        (False, lambda s: NghttpdOptions.create(s, "map")),
    ):
        supported = spec.settings(client)
        assert supported is not None
        role = "client" if client else "server"
        value = 16384 if setting == "max_frame_size" else 1  # in range for every setting
        overrides = (f'nodes.{role}.engine="nghttp2"', f"sweep.{setting}=[{value}]")
        if setting in supported:
            create({setting: value})
            continue
        with pytest.raises(UsageError):
            create({setting: value})
        with pytest.raises(ConfigError, match=f"{spec.tool(client)} has no option"):
            load_config(None, overrides)
