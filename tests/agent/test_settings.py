from __future__ import annotations

import pytest
from h2.settings import SettingCodes
from hypothesis import given
from hypothesis import strategies as st

from agent.errors import SettingsError
from agent.h2.settings import SETTING_SPECS, parse_setting, parse_settings, to_h2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("initial_window_size=256", ("initial_window_size", 256)),
        ("SETTINGS_INITIAL_WINDOW_SIZE=65535", ("initial_window_size", 65535)),
        ("initial-window-size=0", ("initial_window_size", 0)),
        ("max_frame_size=0x4000", ("max_frame_size", 16384)),
        ("enable_push=1", ("enable_push", 1)),
        ("header_table_size=4294967295", ("header_table_size", 2**32 - 1)),
    ],
)
def test_accepts_every_spelling(text: str, expected: tuple[str, int]) -> None:
    assert parse_setting(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("initial_window_size=2147483648", "outside RFC 9113's range 0..2147483647"),
        ("max_frame_size=16383", "16384..16777215"),
        ("max_frame_size=16777216", "16384..16777215"),
        ("enable_push=2", "0..1"),
        ("header_table_size=-1", "0..4294967295"),
        ("no_such_setting=1", "unknown HTTP/2 setting 'no_such_setting'"),
        ("initial_window_size", "NAME=VALUE"),
        ("initial_window_size=big", "non-integer"),
    ],
)
def test_rejects_with_one_line_naming_the_setting(text: str, fragment: str) -> None:
    with pytest.raises(SettingsError) as info:
        parse_setting(text)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_all_six_rfc_settings_are_known() -> None:
    assert set(to_h2({name: spec.minimum for name, spec in SETTING_SPECS.items()})) == {
        SettingCodes.HEADER_TABLE_SIZE,
        SettingCodes.ENABLE_PUSH,
        SettingCodes.MAX_CONCURRENT_STREAMS,
        SettingCodes.INITIAL_WINDOW_SIZE,
        SettingCodes.MAX_FRAME_SIZE,
        SettingCodes.MAX_HEADER_LIST_SIZE,
    }


@given(st.sampled_from(sorted(SETTING_SPECS)), st.integers(-(2**33), 2**33))
def test_range_check_matches_the_rfc_table(name: str, value: int) -> None:
    spec = SETTING_SPECS[name]
    if spec.minimum <= value <= spec.maximum:
        assert parse_setting(f"{name}={value}") == (name, value)
    else:
        with pytest.raises(SettingsError):
            parse_setting(f"{name}={value}")


def test_later_value_wins() -> None:
    assert parse_settings(["max_concurrent_streams=1", "max_concurrent_streams=7"]) == {
        "max_concurrent_streams": 7
    }
