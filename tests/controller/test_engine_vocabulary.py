"""The engine vocabulary is declared once (agent.engines) and both sides of the process boundary
read it: the agent's --engine choices, the config's engine keys, and what each engine can
announce, refused alike by the agent and at config load."""

from __future__ import annotations

import argparse

import pytest

from agent.commands.common import add_engine_options
from agent.engines import RENAMED, engine_names, engine_spec
from agent.engines.nghttp2.options import NghttpdOptions, NghttpOptions
from agent.errors import UsageError
from agent.h2.settings import SETTING_SPECS
from controller.config import load_config
from controller.errors import ConfigError


def test_the_agent_and_the_config_take_every_registered_engine() -> None:
    parser = argparse.ArgumentParser()
    add_engine_options(parser)
    for name in engine_names():
        assert parser.parse_args(["--engine", name]).engine == name
        spec = engine_spec(name)
        overrides = [f'nodes.server.engine="{name}"']
        if spec.workloads is not None:
            overrides += [f'workload.kind="{spec.workloads[0]}"']
            if spec.workloads[0] == "api":
                overrides += ["sweep={users=[4]}"]
        assert load_config(None, overrides).server.engine == name


@pytest.mark.parametrize("former", sorted(RENAMED))
def test_a_former_engine_name_is_refused_in_one_line_naming_the_new(former: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_config(None, [f'nodes.client.engine="{former}"'])
    message = str(refused.value)
    assert "\n" not in message
    assert f'engine "{former}" is now called "{RENAMED[former]}"' in message
    with pytest.raises(UsageError, match=f"now called '{RENAMED[former]}'"):
        engine_spec(former)


@pytest.mark.parametrize("setting", sorted(SETTING_SPECS))
def test_nghttp2_refuses_a_setting_on_both_sides_alike(setting: str) -> None:
    spec = engine_spec("nghttp2")
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
