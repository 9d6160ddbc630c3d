"""The pure parts of controller.nodes: command lines, parsers, clock estimate, platform tags."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.errors import ConfigError, DeviceError
from controller.nodes import shell
from controller.nodes.clock import Reading, RoundTrip, clock_offset, estimate, parse_reply
from controller.nodes.errors import DeployError, NodeError, NodeGroupError
from controller.nodes.group import fan_out
from controller.nodes.platform import PlatformFacts, cpu_model
from controller.nodes.wheel import (
    Wheel,
    download_dependencies,
    extra_requirements,
    runtime_requirements,
)


def sh(command: str) -> str:
    return subprocess.run(
        ["/bin/sh", "-c", command], capture_output=True, text=True, check=True
    ).stdout


_words = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"))


@given(st.lists(_words, min_size=1, max_size=4))
def test_join_passes_every_word_through_the_shell_unchanged(words):
    printed = subprocess.run(
        ["/bin/sh", "-c", "printf '%s\\0' " + shell.join(words)], capture_output=True, check=True
    ).stdout
    assert printed.decode().split("\0")[:-1] == words


@pytest.mark.parametrize(
    ("path", "expanded"),
    [
        ("~", "/home/pi"),
        ("~/h2iot/venv", "/home/pi/h2iot/venv"),
        ("/abs/~/x", "/abs/~/x"),
        ("rel/x", "rel/x"),
        ("~pi/x", "~pi/x"),
    ],
)
def test_expand_home(path, expanded):
    assert shell.expand_home(path, "/home/pi") == expanded
    if path.startswith("~/"):
        assert shell.expand_home(path, "/home/pi/") == expanded


@pytest.mark.parametrize(
    ("stdout", "offset", "lines", "next_offset"),
    [
        ("", 0, (), 0),
        ("0\n", 0, (), 0),
        ("5\nab\ncd", 0, ("ab",), 3),
        ("5\nab\ncd\n", 0, ("ab", "cd"), 6),
        ("9\ncd\nef\n", 3, ("cd", "ef"), 9),
        ("4\n\n\n", 2, ("", ""), 4),
        ("7\n\u00e9\n", 0, ("\u00e9",), 3),
    ],
)
def test_parse_new_lines(stdout, offset, lines, next_offset):
    parsed = shell.parse_new_lines(stdout, offset)
    assert parsed.lines == lines
    assert parsed.next_offset_bytes == next_offset


@pytest.mark.parametrize(("stdout", "offset"), [("", 4), ("3\n", 4)])
def test_parse_new_lines_refuses_a_file_that_shrank_or_went(stdout, offset):
    with pytest.raises(ValueError, match=r"gone|shrank"):
        shell.parse_new_lines(stdout, offset)


def test_read_since_reads_a_real_file_incrementally(tmp_path):
    log = tmp_path / "it's a log"
    assert shell.parse_new_lines(sh(shell.read_since(str(log), 0)), 0).lines == ()
    log.write_text('{"a": 1}\n{"b"')
    first = shell.parse_new_lines(sh(shell.read_since(str(log), 0)), 0)
    assert first.lines == ('{"a": 1}',)
    with log.open("a") as file:
        file.write(': 2}\n{"c": 3}\n')
    second = shell.parse_new_lines(
        sh(shell.read_since(str(log), first.next_offset_bytes)), first.next_offset_bytes
    )
    assert second.lines == ('{"b": 2}', '{"c": 3}')
    assert second.next_offset_bytes == log.stat().st_size


def test_parse_stop_outcome():
    assert shell.parse_stop_outcome("killed\n") == "killed"
    assert shell.parse_stop_outcome("terminated\n") == "terminated"
    assert shell.parse_stop_outcome("not-running\n") == "not-running"
    with pytest.raises(ValueError):
        shell.parse_stop_outcome("still-running\n")


@pytest.mark.parametrize(
    ("status", "duration", "timed_out"),
    [(124, 0.1, True), (137, 5.0, True), (137, 1.0, False), (0, 9.0, False), (1, 9.0, False)],
)
def test_is_timeout(status, duration, timed_out):
    assert shell.is_timeout(status, duration, 5.0) is timed_out


def test_with_timeout_kills_the_command_and_its_children():
    command = shell.with_timeout("sleep 30 & sleep 30; echo never", 0.2)
    result = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, check=False)
    assert result.returncode == shell.TIMEOUT_EXIT_STATUS
    assert "never" not in result.stdout


def test_clock_loop_answers_each_line_with_both_clocks():
    loop = subprocess.run(
        ["/bin/sh", "-c", shell.clock_loop("python3")],
        input=b"\n\n\n",
        capture_output=True,
        check=True,
    )
    replies = [parse_reply(line) for line in loop.stdout.splitlines()]
    assert len(replies) == 3
    assert [mono for _, mono in replies] == sorted(mono for _, mono in replies)


def test_parse_reply_refuses_other_lines():
    for line in (b"", b"12", b"1 2 3", b"a b"):
        with pytest.raises(ValueError):
            parse_reply(line)


_trips = st.lists(
    st.tuples(
        st.integers(0, 10**12),  # local send time
        st.integers(0, 10**7),  # delay to the node
        st.integers(0, 10**7),  # delay back
    ),
    min_size=1,
    max_size=50,
)


@given(
    offset=st.integers(-(10**15), 10**15), mono_offset=st.integers(-(10**15), 10**15), trips=_trips
)
def test_clock_offset_bounds_hold_the_true_offset(offset, mono_offset, trips):
    samples = [
        RoundTrip(
            wall=Reading(send, send + out + offset, send + out + back),
            mono=Reading(send, send + out + mono_offset, send + out + back),
        )
        for send, out, back in trips
    ]
    measured = clock_offset(samples)
    assert abs(measured.wall_offset_ns - offset) <= measured.uncertainty_ns
    assert abs(measured.monotonic_offset_ns - mono_offset) <= measured.uncertainty_ns
    best = min(out + back for _, out, back in trips)
    assert measured.best_round_trip_ns == best
    assert measured.uncertainty_ns <= best // 2 + 1
    assert measured.samples == len(trips)


def test_estimate_falls_back_to_the_shortest_round_trip_when_intervals_disagree():
    # A clock step between the readings: no offset fits both.
    first, second = Reading(0, 100, 10), Reading(1000, 5000, 1020)
    assert estimate([first, second]) == (95, 5)


def test_clock_offset_needs_samples():
    with pytest.raises(ValueError):
        clock_offset([])


PI_CPUINFO = """processor\t: 0
model name\t: ARMv7 Processor rev 4 (v7l)
BogoMIPS\t: 38.40

processor\t: 1
model name\t: ARMv7 Processor rev 4 (v7l)

Hardware\t: BCM2835
Revision\t: a02082
Model\t\t: Raspberry Pi 3 Model B Rev 1.2
"""


def test_cpu_model():
    assert cpu_model(PI_CPUINFO) == "Raspberry Pi 3 Model B Rev 1.2: ARMv7 Processor rev 4 (v7l) x2"
    assert cpu_model("processor : 0\nmodel name : AMD EPYC 7B13\n") == "AMD EPYC 7B13 x1"
    assert cpu_model("") == "?"


def _facts(**changes):
    base = {
        "python": "3.11.2",
        "implementation": "cpython",
        "machine": "x86_64",
        "libc": ("glibc", "2.36"),
        "bits": 64,
    }
    return PlatformFacts(**{**base, **changes})


def test_platform_facts_parse_and_pip_target():
    facts = PlatformFacts.parse(
        '{"python": "3.11.2", "implementation": "cpython", "machine": "aarch64",'
        ' "libc": ["glibc", "2.36"], "bits": 64}'
    )
    assert facts.key == "cpython3.11-glibc2.36-aarch64"
    target = facts.pip_target_args()
    assert target[:5] == [
        "--only-binary=:all:",
        "--implementation",
        "cp",
        "--python-version",
        "3.11",
    ]
    platforms = target[6::2]
    assert set(target[5::2]) == {"--platform"}
    assert platforms[0] == "manylinux_2_36_aarch64"
    assert platforms[-1] == "linux_aarch64"
    assert "manylinux_2_5_aarch64" in platforms
    assert "manylinux2014_aarch64" in platforms
    assert "manylinux_2_37_aarch64" not in platforms


def test_old_glibc_gets_no_newer_manylinux_tags():
    platforms = _facts(libc=("glibc", "2.12")).pip_target_args()[6::2]
    assert "manylinux2010_x86_64" in platforms
    assert "manylinux2014_x86_64" not in platforms
    assert "manylinux_2_13_x86_64" not in platforms


def test_a_32_bit_userland_on_a_64_bit_kernel_gets_32_bit_wheels():
    assert _facts(machine="aarch64", bits=32).arch == "armv7l"
    assert (
        "manylinux_2_31_armv7l"
        in _facts(machine="aarch64", bits=32, libc=("glibc", "2.31")).pip_target_args()
    )


@pytest.mark.parametrize(
    "changes",
    [
        {"libc": ("", "")},
        {"libc": ("musl", "1.2")},
        {"libc": ("glibc", "3.0")},
        {"implementation": "graalpy"},
    ],
)
def test_platforms_without_manylinux_wheels_are_named(changes):
    with pytest.raises(ValueError):
        _facts(**changes).pip_target_args()


def test_runtime_requirements_leave_out_extras():
    assert runtime_requirements(
        [
            "h2>=4.1",
            "psutil>=5.9",
            'gpiod>=2.0; extra == "gpio"',
            "fabric>=3.2; extra=='controller'",
            'tomli; python_version < "3.11"',
            'x; python_version < "3.12" and extra == "test"',
        ]
    ) == ("h2>=4.1", "psutil>=5.9", 'tomli; python_version < "3.11"')


REQUIRES_DIST = [
    "h2>=4.1",
    'gpiod>=2.0; extra == "gpio"',
    "grpcio>=1.60; extra=='stream'",
    'protobuf>=4; python_version >= "3.11" and extra == "stream"',
    'x; extra == "test" and platform_machine != "armv7l"',
]


def test_an_extras_requirements_keep_their_other_conditions():
    assert extra_requirements(REQUIRES_DIST, "stream") == (
        "grpcio>=1.60",
        'protobuf>=4; python_version >= "3.11"',
    )
    assert extra_requirements(REQUIRES_DIST, "test") == ('x; platform_machine != "armv7l"',)
    assert extra_requirements(REQUIRES_DIST, "gpio") == ("gpiod>=2.0",)
    assert extra_requirements(REQUIRES_DIST, "absent") == ()


def test_a_wheel_names_what_an_extra_adds():
    wheel = Wheel(
        Path("h2iot-1-py3-none-any.whl"), "h2iot", "1", ("h2>=4.1",), {"gpio": ("gpiod",)}
    )
    assert wheel.requirements() == ("h2>=4.1",)
    assert wheel.requirements(("gpio",)) == ("h2>=4.1", "gpiod")
    with pytest.raises(DeployError, match="no pip extra 'stream'"):
        wheel.requirements(("stream",))


def test_an_extra_without_a_wheel_for_the_nodes_platform_fails_in_one_line(tmp_path: Path):
    """psutil publishes no armv7l wheel (a real download from the package index, as a deploy
    does it): a workload needing it could not run on 32-bit Raspberry Pi OS."""
    wheel = Wheel(
        tmp_path / "h2iot-1-py3-none-any.whl", "h2iot", "1", (), {"probes": ("psutil>=5.9",)}
    )
    armv7l = _facts(machine="armv7l", bits=32)
    with pytest.raises(DeployError) as failed:
        download_dependencies(wheel, armv7l, tmp_path / "wheelhouse", ("probes",))
    assert str(failed.value) == (
        "psutil>=5.9 (the pip extra 'probes' the config needs) has no wheel for the "
        "node's platform cpython3.11-glibc2.36-armv7l on the package index"
    )


def test_fan_out_keeps_partial_results_and_one_aggregate_error():
    def work(value: int) -> int:
        if value < 0:
            raise NodeError(f"node {value}: broke")
        return value * 2

    outcome = fan_out({"a": 1, "b": -1, "c": 3}, work)
    assert dict(outcome.succeeded) == {"a": 2, "c": 6}
    assert list(outcome.failed) == ["b"]
    with pytest.raises(NodeGroupError) as raised:
        outcome.raise_on_failure()
    assert raised.value.results == {"a": 2, "c": 6}
    assert str(raised.value) == "node -1: broke"
    assert isinstance(raised.value, DeviceError)
    assert dict(fan_out({"a": 1}, work).raise_on_failure()) == {"a": 2}


def test_fan_out_lets_bugs_propagate():
    def work(value: int) -> int:
        raise KeyError(value)

    with pytest.raises(KeyError):
        fan_out({"a": 1}, work)
    assert fan_out({}, work).raise_on_failure() == {}
    assert not issubclass(NodeError, ConfigError)


def test_start_background_line_is_shlex_quoted():
    line = shell.start_background(["echo", "a b", "$HOME"], "/tmp/p id", "/tmp/l og")
    assert "nohup echo 'a b' '$HOME' >'/tmp/l og' 2>&1 </dev/null &" in line
    assert shlex.quote("/tmp/p id") in line
