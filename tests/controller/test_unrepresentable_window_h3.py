"""`workload.unrepresentable_window = "reject"` on the nghttp2 engine refuses a window that is
not 2^N - 1 only where nghttp or nghttpd run it (h2c, h2): at h3 points the engine runs ngtcp2's
gtlsclient and gtlsserver, which take any window exactly (issue 23)."""

from __future__ import annotations

import pytest

from controller.config import load_config
from controller.errors import ConfigError

NGHTTP2_REJECTING = (
    'nodes.client.engine="nghttp2"',
    'nodes.server.engine="nghttp2"',
    'workload.unrepresentable_window="reject"',
)


@pytest.mark.parametrize(
    ("protocols", "at"),
    [('["h2", "h3"]', "at protocol h2, "), ('["h2c", "h2", "h3"]', "at protocol h2c and h2, ")],
)
def test_a_window_nghttp_cannot_take_is_refused_at_its_http2_points(
    protocols: str, at: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(
            None,
            (*NGHTTP2_REJECTING, f"sweep={{initial_window_size = [4096], protocol = {protocols}}}"),
        )
    message = str(info.value)
    assert message == (
        "--set: sweep.initial_window_size[0]: 4096 is not 2^N - 1 bytes, which nghttp2 needs "
        f'({at}nodes.client.engine = "nghttp2"; at h3 it takes any window); the nearest is '
        '4095: use it, or set workload.unrepresentable_window = "map" to run the nearest in its '
        "place"
    )
    assert "\n" not in message
    assert info.value.exit_status == 2


@pytest.mark.parametrize(
    "protocol",
    ['sweep={initial_window_size = [4096], protocol = ["h3"]}', 'workload.protocol="h3"'],
)
def test_h3_alone_takes_any_window_on_nghttp2(protocol: str) -> None:
    config = load_config(
        None,
        (
            *NGHTTP2_REJECTING,
            protocol,
            "sweep.initial_window_size=[4096]",
            "workload.connection_window=65536",
        ),
    )
    assert config.protocols == ("h3",)
    assert dict(config.sweep.axes)["initial_window_size"] == (4096,)
    assert config.workload.connection_window == 65536


def test_an_http2_run_is_refused_as_before() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(
            None,
            (*NGHTTP2_REJECTING, 'workload.protocol="h2"', "sweep.initial_window_size=[4096]"),
        )
    assert str(info.value).startswith(
        "--set: sweep.initial_window_size[0]: 4096 is not 2^N - 1 bytes, which nghttp2 needs "
        '(nodes.client.engine = "nghttp2"); the nearest is 4095'
    )
