"""The payload workload's codecs against the fastest well-kept library for each format, measured
(not a test): run `python benchmarks/payload_codecs.py`.

For each encoding and dataset size, the CPU time (this thread's) to encode a dataset into a body
and to decode that body into values, best of `--runs` runs of enough repetitions to fill
`--min-cpu-s`, as MB/s of the body (our body's length for ours and the anchor alike: both do the
same job for the same dataset). Anchors, side by side in the same process, interleaved:

- soap: lxml (libxml2): `etree.fromstring` and reading every item's text to float; writing the
  same elements with `SubElement` and `tostring`.
- json: the standard json module on the ready-made tree (ours adds the dataset <-> tree mapping
  and its type checks).
- cbor: cbor2's C extension on the ready-made tree (likewise).
- swa (decode only, no well-kept library writes MIME multipart): python-multipart's parser, then
  the same envelope and packed-data reading as ours.
- dime and raw have no library: dime is shown against raw (the framing's cost); raw is the floor.

Then whether the reference's ordering holds in body size and in codec CPU (encode + decode):
DIME < SwA < SOAP. Writes `measurements.csv` and `summary.md` to `--out`
(default `data/bench/payload-codecs-<UTC time>/`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from typing import Any

import cbor2
from bench_support import write_csv
from lxml import etree
from python_multipart.multipart import MultipartParser

from agent.workloads.payload.codecs import ENCODINGS, envelope
from agent.workloads.payload.codecs.tree import to_tree
from agent.workloads.payload.dataset import Dataset, Matrix, make_dataset, unpack

SOAP_ENV = "{http://schemas.xmlsoap.org/soap/envelope/}"


@dataclass(frozen=True)
class Measurement:
    encoding: str
    data: str
    size: int
    body_bytes: int
    encode_mb_per_s: float
    decode_mb_per_s: float
    anchor: str
    anchor_encode_mb_per_s: float | None
    anchor_decode_mb_per_s: float | None

    @property
    def encode_ratio(self) -> float | None:
        if self.anchor_encode_mb_per_s is None:
            return None
        return self.encode_mb_per_s / self.anchor_encode_mb_per_s

    @property
    def decode_ratio(self) -> float | None:
        if self.anchor_decode_mb_per_s is None:
            return None
        return self.decode_mb_per_s / self.anchor_decode_mb_per_s


def cpu_per_op_s(operation: Callable[[], object], runs: int, min_cpu_s: float) -> float:
    """Best of `runs`, each repeating the operation until `min_cpu_s` of thread CPU passed."""
    best = float("inf")
    for _ in range(runs):
        count = 0
        start = time.thread_time()
        while True:
            operation()
            count += 1
            spent = time.thread_time() - start
            if spent >= min_cpu_s:
                break
        best = min(best, spent / count)
    return best


def lxml_encode(dataset: Dataset) -> bytes:
    root = etree.Element(f"{SOAP_ENV}Envelope", nsmap={"soapenv": SOAP_ENV[1:-1]})
    send = etree.SubElement(etree.SubElement(root, f"{SOAP_ENV}Body"), "{urn:h2iot:payload}send")
    if isinstance(dataset, Matrix):
        matrix = etree.SubElement(send, "matrix")
        for value in dataset.values:
            etree.SubElement(matrix, "item").text = repr(value)
    else:
        records = etree.SubElement(send, "records")
        for record in dataset.records:
            item = etree.SubElement(records, "item")
            etree.SubElement(item, "text").text = record.text
            etree.SubElement(item, "number").text = str(record.number)
            etree.SubElement(item, "flag").text = "true" if record.flag else "false"
    bytes_: bytes = etree.tostring(root, xml_declaration=True, encoding="UTF-8")
    return bytes_


def lxml_decode(body: bytes) -> object:
    root = etree.fromstring(body, etree.XMLParser(resolve_entities=False, no_network=True))
    items = root.iter("item")
    first = root.find(".//matrix")
    if first is not None:
        return [float(item.text or "") for item in items]
    return [
        (item.findtext("text"), int(item.findtext("number") or ""), item.findtext("flag") == "true")
        for item in items
    ]


def multipart_decode(content_type: str, body: bytes) -> Dataset:
    message = Message()
    message["Content-Type"] = content_type
    parts: list[bytearray] = []
    parser = MultipartParser(
        str(message.get_param("boundary")),
        {
            "on_part_begin": lambda: parts.append(bytearray()),
            "on_part_data": lambda data, start, end: parts[-1].extend(data[start:end]),
        },
    )
    parser.write(body)
    parser.finalize()
    root, attachment = parts
    envelope.read(root)
    return unpack(attachment, "attachment")


def anchors(
    name: str, dataset: Dataset, content_type: str, body: bytes
) -> tuple[str, Callable[[], object] | None, Callable[[], object] | None]:
    tree: Any = to_tree(dataset)
    if name == "soap":
        return "lxml", lambda: lxml_encode(dataset), lambda: lxml_decode(body)
    if name == "json":
        return (
            "json (stdlib)",
            lambda: json.dumps(tree, separators=(",", ":"), ensure_ascii=False).encode(),
            lambda: json.loads(body),
        )
    if name == "cbor":
        return "cbor2 (C)", lambda: cbor2.dumps(tree), lambda: cbor2.loads(body)
    if name == "swa":
        return "python-multipart", None, lambda: multipart_decode(content_type, body)
    if name == "dime":
        raw = ENCODINGS["raw"]
        raw_type, raw_body = raw.encode(dataset)
        return "raw (ours)", lambda: raw.encode(dataset), lambda: raw.decode(raw_type, raw_body)
    return "none", None, None


def measure(name: str, data: str, size: int, runs: int, min_cpu_s: float) -> Measurement:
    dataset = make_dataset(data, size, 0)
    encoding = ENCODINGS[name]
    content_type, body = encoding.encode(dataset)
    mb = len(body) / 1e6
    anchor, anchor_encode, anchor_decode = anchors(name, dataset, content_type, body)
    encode_s = cpu_per_op_s(lambda: encoding.encode(dataset), runs, min_cpu_s)
    decode_s = cpu_per_op_s(lambda: encoding.decode(content_type, body), runs, min_cpu_s)
    return Measurement(
        encoding=name,
        data=data,
        size=size,
        body_bytes=len(body),
        encode_mb_per_s=mb / encode_s,
        decode_mb_per_s=mb / decode_s,
        anchor=anchor,
        anchor_encode_mb_per_s=(
            None if anchor_encode is None else mb / cpu_per_op_s(anchor_encode, runs, min_cpu_s)
        ),
        anchor_decode_mb_per_s=(
            None if anchor_decode is None else mb / cpu_per_op_s(anchor_decode, runs, min_cpu_s)
        ),
    )


def shown(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def ordering(results: list[Measurement]) -> list[str]:
    """Per dataset: does DIME < SwA < SOAP hold in body size and in encode + decode CPU?"""
    lines = []
    keys = sorted({(m.data, m.size) for m in results})
    for data, size in keys:
        by_name = {m.encoding: m for m in results if (m.data, m.size) == (data, size)}
        if not {"dime", "swa", "soap"} <= set(by_name):
            continue
        dime, swa, soap = by_name["dime"], by_name["swa"], by_name["soap"]

        def cpu_s(m: Measurement) -> float:
            return m.body_bytes / 1e6 / m.encode_mb_per_s + m.body_bytes / 1e6 / m.decode_mb_per_s

        size_holds = dime.body_bytes < swa.body_bytes < soap.body_bytes
        cpu_holds = cpu_s(dime) < cpu_s(swa) < cpu_s(soap)
        lines.append(
            f"| {data} | {size} | {dime.body_bytes:,} < {swa.body_bytes:,} < {soap.body_bytes:,}: "
            f"{'holds' if size_holds else 'does not hold'} | "
            f"{cpu_s(dime) * 1e3:.2f} < {cpu_s(swa) * 1e3:.2f} < {cpu_s(soap) * 1e3:.2f} ms: "
            f"{'holds' if cpu_holds else 'does not hold'} |"
        )
    return lines


def summary(results: list[Measurement]) -> str:
    lines = [
        "| encoding | data | n/m | body bytes | encode MB/s | decode MB/s | anchor | "
        "anchor encode MB/s | anchor decode MB/s | encode ours/anchor | decode ours/anchor |",
        "|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for m in results:
        lines.append(
            f"| {m.encoding} | {m.data} | {m.size} | {m.body_bytes:,} | {m.encode_mb_per_s:.1f} | "
            f"{m.decode_mb_per_s:.1f} | {m.anchor} | {shown(m.anchor_encode_mb_per_s, 1)} | "
            f"{shown(m.anchor_decode_mb_per_s, 1)} | {shown(m.encode_ratio)} | "
            f"{shown(m.decode_ratio)} |"
        )
    lines += [
        "",
        "| data | n/m | body bytes DIME < SwA < SOAP | encode + decode CPU DIME < SwA < SOAP |",
        "|---|---:|---|---|",
        *ordering(results),
    ]
    ratios = [m.decode_ratio for m in results if m.decode_ratio is not None]
    if ratios:
        lines += ["", f"median decode ratio over all rows: {statistics.median(ratios):.2f}"]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--matrix", default="16,64,256", help="matrix sides, comma-separated")
    parser.add_argument("--structs", default="100,1000,10000", help="record counts")
    parser.add_argument("--encodings", default=",".join(ENCODINGS))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--min-cpu-s", type=float, default=0.2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    out = args.out or Path("data/bench") / time.strftime(
        "payload-codecs-%Y%m%dT%H%M%SZ", time.gmtime()
    )
    out.mkdir(parents=True, exist_ok=True)
    cases = [("matrix", int(n)) for n in args.matrix.split(",") if n] + [
        ("structs", int(m)) for m in args.structs.split(",") if m
    ]
    results = []
    for data, size in cases:
        for name in args.encodings.split(","):
            result = measure(name, data, size, args.runs, args.min_cpu_s)
            ratios = f"{shown(result.encode_ratio)}, {shown(result.decode_ratio)}"
            print(
                f"{name:5} {data:7} {size:6}: {result.body_bytes:>10,} B, encode "
                f"{result.encode_mb_per_s:8.1f} MB/s, decode {result.decode_mb_per_s:8.1f} MB/s "
                f"({result.anchor}: ratio {ratios})",
                flush=True,
            )
            results.append(result)
    write_csv(out / "measurements.csv", results)
    text = summary(results)
    (out / "summary.md").write_text(text)
    print(text)
    print(f"written to {out}")


if __name__ == "__main__":
    main()
