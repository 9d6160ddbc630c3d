"""Our encoders' bodies read by independent implementations of the same formats, and theirs by
ours: python-multipart (in a process of its own) for SwA's multipart/related, cbrrr (a DAG-CBOR
codec in C) for CBOR both ways, lxml (libxml2) for the SOAP envelope."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from email.message import Message

import cbrrr
import pytest
from lxml import etree

from agent.workloads.payload.codecs import ENCODINGS, cbor_codec, swa
from agent.workloads.payload.codecs.tree import to_tree
from agent.workloads.payload.dataset import Matrix, Structs, make_dataset, pack

# Run in a separate interpreter: python-multipart's low-level parser, reporting each part's
# headers and the sha256 of its bytes as JSON.
MULTIPART_READER = """
import hashlib, json, sys
from python_multipart.multipart import MultipartParser

boundary, body = sys.argv[1], sys.stdin.buffer.read()
parts, headers, data, field, value = [], [], bytearray(), bytearray(), bytearray()

def begin():
    headers.clear(); data.clear()

def header_end():
    headers.append([field.decode(), value.decode()]); field.clear(); value.clear()

def end():
    parts.append({"headers": list(headers), "sha256": hashlib.sha256(data).hexdigest(),
                  "text": data.decode("utf-8", "replace") if len(data) < 4096 else ""})

parser = MultipartParser(boundary, {
    "on_part_begin": begin,
    "on_header_field": lambda d, s, e: field.extend(d[s:e]),
    "on_header_value": lambda d, s, e: value.extend(d[s:e]),
    "on_header_end": header_end,
    "on_part_data": lambda d, s, e: data.extend(d[s:e]),
    "on_part_end": end,
})
parser.write(body)
parser.finalize()
print(json.dumps(parts))
"""


def boundary_of(content_type: str) -> str:
    message = Message()
    message["Content-Type"] = content_type
    boundary = message.get_param("boundary")
    assert isinstance(boundary, str)
    return boundary


@pytest.mark.parametrize(("data", "size"), [("matrix", 64), ("structs", 300)])
def test_an_independent_parser_reads_our_multipart_messages(data: str, size: int) -> None:
    dataset = make_dataset(data, size, 5)
    content_type, body = swa.encode(dataset)
    done = subprocess.run(
        [sys.executable, "-c", MULTIPART_READER, boundary_of(content_type)],
        input=body,
        capture_output=True,
        check=True,
        timeout=120,
    )
    root, attachment = json.loads(done.stdout)
    assert dict(root["headers"])["Content-ID"] == "<envelope@h2iot>"
    assert dict(root["headers"])["Content-Type"].startswith("text/xml")
    assert 'href="cid:payload@h2iot"' in root["text"]
    assert dict(attachment["headers"]) == {
        "Content-Type": "application/octet-stream",
        "Content-Transfer-Encoding": "binary",
        "Content-ID": "<payload@h2iot>",
    }
    assert attachment["sha256"] == hashlib.sha256(pack(dataset)).hexdigest()
    assert 'start="<envelope@h2iot>"' in content_type and 'type="text/xml"' in content_type


@pytest.mark.parametrize(("data", "size"), [("matrix", 32), ("structs", 200)])
def test_cbor_agrees_with_a_second_implementation_both_ways(data: str, size: int) -> None:
    dataset = make_dataset(data, size, 6)
    tree = to_tree(dataset)
    body = cbor_codec.encode(dataset)[1]
    assert cbrrr.decode_dag_cbor(body) == tree
    theirs = cbrrr.encode_dag_cbor(tree)
    assert pack(cbor_codec.decode("application/cbor", theirs)) == pack(dataset)
    assert theirs == body  # both write CBOR's deterministic form


@pytest.mark.parametrize(("data", "size"), [("matrix", 16), ("structs", 100)])
def test_libxml2_reads_our_soap_envelope_to_the_same_values(data: str, size: int) -> None:
    dataset = make_dataset(data, size, 7)
    body = ENCODINGS["soap"].encode(dataset)[1]
    root = etree.fromstring(body, etree.XMLParser(resolve_entities=False, no_network=True))
    assert root.tag == "{http://schemas.xmlsoap.org/soap/envelope/}Envelope"
    items = root.findall(".//item")
    if isinstance(dataset, Matrix):
        assert [float(item.text or "") for item in items] == list(dataset.values)
        return
    assert isinstance(dataset, Structs)
    assert [
        (item.findtext("text") or "", int(item.findtext("number") or ""), item.findtext("flag"))
        for item in items
    ] == [(r.text, r.number, "true" if r.flag else "false") for r in dataset.records]


def test_we_read_an_envelope_libxml2_wrote() -> None:
    """The same values written by another XML serialiser (its own quoting, prefixes and
    whitespace) decode to the same dataset."""
    dataset = make_dataset("structs", 20, 8)
    body = ENCODINGS["soap"].encode(dataset)[1]
    rewritten = etree.tostring(
        etree.fromstring(body), xml_declaration=True, encoding="UTF-8", pretty_print=True
    )
    assert rewritten != body
    assert ENCODINGS["soap"].decode("text/xml", rewritten) == dataset
