"""Settings parsing's refusals, by their public messages."""

from __future__ import annotations

import pytest

from agent.errors import SettingsError
from agent.h2.settings import parse_setting


def test_an_unknown_name_lists_every_known_one():
    with pytest.raises(SettingsError) as caught:
        parse_setting("window=5")
    assert str(caught.value) == (
        "unknown HTTP/2 setting 'window' (known: header_table_size, enable_push, "
        "max_concurrent_streams, initial_window_size, max_frame_size, max_header_list_size)"
    )


def test_the_name_ends_at_the_first_equals_sign():
    with pytest.raises(SettingsError) as caught:
        parse_setting("initial_window_size=1=2")
    assert str(caught.value) == "setting initial_window_size has a non-integer value '1=2'"
