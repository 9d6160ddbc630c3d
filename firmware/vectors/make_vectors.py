"""Writes firmware/vectors/frames.json, the golden frames of PROTOCOL.md (protocol version 2).

This is an independent reference encoder in Python: the C host tests and the controller's Python
tests both check their own encoders/decoders against its output, so a mistake on either side
shows up as a mismatch. Run: python3 firmware/vectors/make_vectors.py [--check]
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path
from typing import Any

SYNC = b"\xa5\x5a"
OUT = Path(__file__).with_name("frames.json")


def crc16_ccitt_false(data: bytes) -> int:
    crc = 0xFFFF
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


def frame(frame_type: int, seq: int, payload: bytes) -> bytes:
    body = struct.pack("<HBH", len(payload), frame_type, seq) + payload
    return SYNC + body + struct.pack("<H", crc16_ccitt_false(body))


def info(fields: dict[str, Any]) -> bytes:
    return struct.pack(
        "<BBBBBIBHIBBIBB",
        fields["protocol_version"],
        fields["fw_major"],
        fields["fw_minor"],
        fields["fw_patch"],
        fields["mcu_id"],
        fields["f_cpu_hz"],
        fields["adc_bits"],
        fields["adc_ref_mv"],
        fields["sample_rate_hz"],
        fields["channel_mask"],
        fields["oversampling"],
        fields["baud"],
        fields["marker_pin"],
        fields["i2c_mask"],
    ) + fields["board"].encode("ascii")


def samples(fields: dict[str, Any]) -> bytes:
    values = [v for sample in fields["samples"] for v in sample]
    head = struct.pack("<IB", fields["first_sample_index"], fields["columns"])
    return head + struct.pack(f"<{len(values)}H", *values)


def marker(fields: dict[str, Any]) -> bytes:
    return struct.pack("<IBB", fields["sample_index"], fields["pin"], fields["edge"])


def status(fields: dict[str, Any]) -> bytes:
    return struct.pack(
        "<IIIHB",
        fields["samples_taken"],
        fields["samples_dropped"],
        fields["frames_sent"],
        fields["commands_rejected"],
        fields["running"],
    )


def ack(fields: dict[str, Any]) -> bytes:
    return struct.pack("<BHB", fields["command_type"], fields["command_seq"], fields["result"])


def info_fields(board: str, mcu_id: int, rate: int, mask: int, baud: int) -> dict[str, Any]:
    return {
        "protocol_version": 2,
        "fw_major": 1,
        "fw_minor": 0,
        "fw_patch": 0,
        "mcu_id": mcu_id,
        "f_cpu_hz": 16_000_000,
        "adc_bits": 10,
        "adc_ref_mv": 5000,
        "sample_rate_hz": rate,
        "channel_mask": mask,
        "oversampling": 1,
        "baud": baud,
        "marker_pin": 2,
        "i2c_mask": 0,
        "board": board,
    }


def ina226_cases() -> list[tuple[str, int, int, dict[str, Any], bytes]]:
    """Firmware 1.2.0's INA226 channels: an INFO whose I2C mask has chips at 0x40 and 0x41
    (bits 0, 1), the one at 0x40 an INA226 (bit 4); and their columns: INA226 shunt (2.5
    uV/LSB, two's complement) and bus (1.25 mV/LSB, no flag bits) then the INA219's: 60.00 mV
    at 5.000 V, 5.1 V idle, -2.5 uV, the INA226's full scale (+81.9175 mV, 40.95875 V), and
    both failed (shunt 0, bus 0xFFFF)."""
    ina226 = info_fields("mega2560", 1, 800, 0x01, 500_000)
    ina226["i2c_mask"] = 0x13
    columns = {
        "first_sample_index": 77,
        "columns": 4,
        "samples": [
            [24000, 4000, 6000, (1250 << 3) | 2],
            [48, 4080, 12, (1275 << 3) | 2],
            [0xFFFF, 4000, 0xFFFF, (1250 << 3) | 2],
            [0x7FFF, 0x7FFF, 0x8000, (4000 << 3) | 3],
            [0x0000, 0xFFFF, 0x0000, 0xFFFF],
        ],
    }
    return [
        ("info_mega2560_ina226", 0x01, 11, ina226, info(ina226)),
        ("samples_ina226_and_ina219", 0x02, 12, columns, samples(columns)),
    ]


def cases() -> list[tuple[str, int, int, dict[str, Any], bytes]]:
    """(name, type, seq, fields, payload) for every frame type and the edge cases."""
    out: list[tuple[str, int, int, dict[str, Any], bytes]] = []

    def add(name: str, ftype: int, seq: int, fields: dict[str, Any], payload: bytes) -> None:
        out.append((name, ftype, seq, fields, payload))

    mega = info_fields("mega2560", 1, 1000, 0x03, 500_000)
    add("info_mega2560_defaults", 0x01, 0, mega, info(mega))
    uno = info_fields("uno", 2, 250, 0x01, 500_000)
    uno["oversampling"] = 4
    add("info_uno", 0x01, 7, uno, info(uno))
    long_name = info_fields("ABCDEFGHIJKLMNOP", 1, 10_000, 0xF0, 1_000_000)
    add("info_board_name_16_bytes", 0x01, 300, long_name, info(long_name))
    ina = info_fields("mega2560", 1, 800, 0x01, 500_000)
    ina["i2c_mask"] = 0x01
    add("info_mega2560_ina219", 0x01, 8, ina, info(ina))

    one = {"first_sample_index": 0, "columns": 1, "samples": [[512]]}
    add("samples_one_value", 0x02, 1, one, samples(one))
    two = {
        "first_sample_index": 20,
        "columns": 2,
        "samples": [[i * 37 % 1024, 1023 - i * 11] for i in range(10)],
    }
    add("samples_2ch_10", 0x02, 2, two, samples(two))
    full = {
        "first_sample_index": 0xFFFFFFC0,
        "columns": 4,
        "samples": [[(s * 4 + c) * 8 % 1024 for c in range(4)] for s in range(32)],
    }
    add("samples_max_channels_mega_frame", 0x02, 3, full, samples(full))
    extremes = {"first_sample_index": 123_456_789, "columns": 3, "samples": [[0, 1023, 0]]}
    add("samples_extremes", 0x02, 0xA55A, extremes, samples(extremes))
    sync_in_payload = {
        "first_sample_index": 0x5AA55AA5,
        "columns": 1,
        "samples": [[0x5A5], [0x0A5], [0x35A]],
    }
    add("samples_sync_bytes_in_payload", 0x02, 0x5AA5, sync_in_payload, samples(sync_in_payload))
    # A0 (ACS712) then the INA219 at 0x40: shunt register (10 uV/LSB, two's complement), bus
    # register (bits 15..3 x 4 mV, CNVR bit 1): 5.000 V with 60.00 mV, 5.1 V idle, a reverse
    # current of -10 uV, and an INA219 that did not answer (bus 0xFFFF, shunt 0).
    ina_samples = {
        "first_sample_index": 4096,
        "columns": 3,
        "samples": [
            [530, 6000, (1250 << 3) | 2],
            [515, 120, (1275 << 3) | 2],
            [511, 0xFFFF, (1250 << 3)],
            [512, 0x0000, 0xFFFF],
        ],
    }
    add("samples_adc_and_ina219", 0x02, 9, ina_samples, samples(ina_samples))
    two_ina = {
        "first_sample_index": 0,
        "columns": 4,
        "samples": [[0x7FFF, (4000 << 3) | 3, 0x8000, 2]],
    }
    add("samples_two_ina219_extremes", 0x02, 10, two_ina, samples(two_ina))
    out += ina226_cases()

    rise = {"sample_index": 1500, "pin": 2, "edge": 1}
    add("marker_rising", 0x03, 65535, rise, marker(rise))
    fall = {"sample_index": 0, "pin": 2, "edge": 0}
    add("marker_falling_after_seq_wrap", 0x03, 0, fall, marker(fall))

    st = {
        "samples_taken": 10_000,
        "samples_dropped": 3,
        "frames_sent": 1_001,
        "commands_rejected": 2,
        "running": 1,
    }
    add("status_running", 0x04, 1001, st, status(st))
    st0 = {
        "samples_taken": 0xFFFFFFFF,
        "samples_dropped": 0,
        "frames_sent": 0x12345678,
        "commands_rejected": 65535,
        "running": 0,
    }
    add("status_stopped", 0x04, 42, st0, status(st0))

    for result, name in enumerate(["ok", "bad_length", "bad_value", "unknown", "busy"]):
        a = {"command_type": [0x82, 0x85, 0x84, 0x99, 0x84][result], "command_seq": 65535 - result}
        a["result"] = result
        add(f"ack_{name}", 0x05, 10 + result, a, ack(a))

    add("cmd_identify_empty", 0x81, 0, {}, b"")
    add("cmd_start", 0x82, 1, {}, b"")
    add("cmd_stop", 0x83, 2, {}, b"")
    add("cmd_set_rate_1000", 0x84, 3, {"rate_hz": 1000}, struct.pack("<I", 1000))
    add("cmd_set_rate_10000", 0x84, 4, {"rate_hz": 10_000}, struct.pack("<I", 10_000))
    add("cmd_set_channels", 0x85, 5, {"channel_mask": 0x0F}, bytes([0x0F]))
    add("cmd_get_status", 0x86, 6, {}, b"")
    add("cmd_set_oversampling", 0x87, 65535, {"oversampling": 4}, bytes([4]))
    add("cmd_set_i2c_channels", 0x88, 7, {"i2c_mask": 0x01}, bytes([0x01]))
    return out


def build() -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "type": ftype,
            "seq": seq,
            "payload_hex": payload.hex(),
            "frame_hex": frame(ftype, seq, payload).hex(),
            "fields": fields,
        }
        for name, ftype, seq, fields, payload in cases()
    ]


def main(argv: list[str]) -> int:
    assert crc16_ccitt_false(b"123456789") == 0x29B1
    text = json.dumps(build(), indent=1) + "\n"
    if "--check" in argv:
        if OUT.read_text() != text:
            print(f"{OUT} is out of date: run {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
