"""The test site: sizes, determinism, manifest, and every file valid of its type.

Validity is checked by independent parsers: Pillow and libjpeg's djpeg decode every image fully,
node checks the scripts' syntax, html.parser reads the page.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import re
import struct
import subprocess
import sys
import warnings
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from agent.errors import SiteError, UsageError
from agent.html_links import subresource_paths
from agent.site import (
    DEFAULT_TOTAL_BYTES,
    MANIFEST_NAME,
    MIN_TOTAL_BYTES,
    SiteFile,
    SiteManifest,
    build_site,
    content_type_for,
    load_manifest,
    parse_manifest,
    render_site,
)
from agent.site._stream import ByteStream
from agent.site.coefficients import CHROMA, EOB, LAST_AC_INDEX, LUMA, _draw_tokens
from agent.site.huffman import MAX_CODE_BITS, build_table
from agent.site.jpeg import encode_jpeg
from tests.conftest import require_tool

SMALL_BYTES = 200_000
TEXT_TYPES = {
    "index.html": "text/html; charset=utf-8",
    "css/style.css": "text/css; charset=utf-8",
    "js/vendor.js": "text/javascript; charset=utf-8",
    "js/app.js": "text/javascript; charset=utf-8",
}
IMAGES = [f"img/photo-{number}.jpg" for number in range(1, 5)]


@pytest.fixture(scope="module")
def small_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SiteManifest]:
    directory = tmp_path_factory.mktemp("small") / "site"
    return directory, build_site(directory, seed=7, total_bytes=SMALL_BYTES)


@pytest.fixture(scope="module")
def default_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SiteManifest]:
    directory = tmp_path_factory.mktemp("default")
    return directory, build_site(directory)


# --- page parsing helpers -------------------------------------------------------------------

VOID_ELEMENTS = {"meta", "link", "img", "br", "hr", "input", "source"}


class PageReader(HTMLParser):
    """Subresource references and a tag-balance check, independent of the agent's own parser."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stylesheets: list[str] = []
        self.scripts: list[str] = []
        self.images: list[tuple[str, int, int]] = []
        self.open: list[str] = []
        self.doctype = ""
        self.errors: list[str] = []

    def handle_decl(self, decl: str) -> None:
        self.doctype = decl

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "link" and values.get("rel") == "stylesheet":
            self.stylesheets.append(values["href"] or "")
        elif tag == "script":
            self.scripts.append(values["src"] or "")
        elif tag == "img":
            self.images.append(
                (values["src"] or "", int(values["width"] or 0), int(values["height"] or 0))
            )
        if tag not in VOID_ELEMENTS:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open.pop() != tag:
            self.errors.append(f"unbalanced </{tag}>")


def read_page(html: bytes) -> PageReader:
    reader = PageReader()
    reader.feed(html.decode("ascii"))
    reader.close()
    return reader


def jpeg_structure(data: bytes) -> tuple[list[int], int, int]:
    """Marker codes before the scan, restart markers in it, scan length; asserts the framing."""
    assert data[:2] == b"\xff\xd8" and data[-2:] == b"\xff\xd9"
    markers: list[int] = []
    position = 2
    while True:
        assert data[position] == 0xFF
        marker = data[position + 1]
        (length,) = struct.unpack(">H", data[position + 2 : position + 4])
        markers.append(marker)
        position += 2 + length
        if marker == 0xDA:  # SOS: the entropy-coded scan follows
            break
    scan = data[position:-2]
    restarts = 0
    for match in re.finditer(rb"\xff(.)", scan, re.DOTALL):
        code = match.group(1)[0]
        if code == 0x00:
            continue
        assert code == 0xD0 + restarts % 8, f"unexpected marker FF{code:02X} in the scan"
        restarts += 1
    return markers, restarts, len(scan)


# --- sizes and determinism -------------------------------------------------------------------


def test_default_site_hits_its_size_and_shape(default_site):
    directory, manifest = default_site
    assert DEFAULT_TOTAL_BYTES == 7_000_000
    assert abs(manifest.total_bytes - DEFAULT_TOTAL_BYTES) <= DEFAULT_TOTAL_BYTES // 100
    assert [file.path for file in manifest.files] == [*TEXT_TYPES, *IMAGES]
    sizes = {file.path: file.size_bytes for file in manifest.files}
    assert sum(sizes[path] for path in IMAGES) > 0.9 * manifest.total_bytes
    for path in ("css/style.css", "js/vendor.js", "js/app.js"):
        assert 10_000 <= sizes[path] <= 200_000, path
    assert load_manifest(directory) == manifest


@settings(max_examples=8, deadline=None)
@given(
    total=st.integers(min_value=MIN_TOTAL_BYTES, max_value=1_500_000),
    seed=st.integers(min_value=-(2**40), max_value=2**70),
)
def test_total_within_one_percent_for_any_size_and_seed(total, seed):
    files = render_site(seed=seed, total_bytes=total)
    assert abs(sum(len(data) for _, data in files) - total) <= total // 100
    assert [path for path, _ in files] == [*TEXT_TYPES, *IMAGES]


def test_same_seed_and_size_give_identical_files(tmp_path, small_site):
    directory, manifest = small_site
    again = build_site(tmp_path / "again", seed=7, total_bytes=SMALL_BYTES)
    assert again == manifest
    for file in manifest.files:
        assert (tmp_path / "again" / file.path).read_bytes() == (directory / file.path).read_bytes()
    assert (tmp_path / "again" / MANIFEST_NAME).read_bytes() == (
        directory / MANIFEST_NAME
    ).read_bytes()


def test_different_seeds_give_different_files(small_site):
    _, manifest = small_site
    other = dict(render_site(seed=8, total_bytes=SMALL_BYTES))
    for file in manifest.files:
        assert hashlib.sha256(other[file.path]).hexdigest() != file.sha256, file.path


def test_site_bytes_are_stable_across_versions_and_platforms():
    # A node and its controller may run different Pythons; the bytes come from SHAKE-256 and
    # integer arithmetic only, so this digest must never change without a format decision.
    assert ByteStream("h2iot").take(8).hex() == hashlib.shake_256(b"h2iot/0").digest(8).hex()
    files = render_site(seed=0, total_bytes=MIN_TOTAL_BYTES)
    digest = hashlib.sha256(b"".join(data for _, data in files)).hexdigest()
    assert digest == "5aef3408224a378f0202bea841dbf743eaf610af7807ed786af1de8da549515e"


@pytest.mark.parametrize("total", [0, MIN_TOTAL_BYTES - 1, -5, (1 << 30) + 1])
def test_sizes_outside_the_range_are_refused(tmp_path, total):
    with pytest.raises(SiteError, match=str(total)) as caught:
        build_site(tmp_path / "site", total_bytes=total)
    assert isinstance(caught.value, UsageError)
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "site").exists()


# --- manifest ---------------------------------------------------------------------------------


def test_manifest_matches_the_files_on_disk(small_site):
    directory, manifest = small_site
    assert manifest.index == "index.html"
    assert manifest.seed == 7
    assert manifest.format_version == 1
    assert manifest.total_bytes == sum(file.size_bytes for file in manifest.files)
    assert abs(manifest.total_bytes - SMALL_BYTES) <= SMALL_BYTES // 100
    on_disk = sorted(
        path.relative_to(directory).as_posix() for path in directory.rglob("*") if path.is_file()
    )
    assert on_disk == sorted([*manifest.by_path(), MANIFEST_NAME])
    for file in manifest.files:
        data = (directory / file.path).read_bytes()
        assert file.size_bytes == len(data)
        assert file.sha256 == hashlib.sha256(data).hexdigest()
        assert file.content_type == TEXT_TYPES.get(file.path, "image/jpeg")
    assert load_manifest(directory) == manifest
    assert parse_manifest(manifest.to_json()) == manifest


def test_rebuilding_over_a_site_replaces_it(tmp_path):
    first = build_site(tmp_path, seed=1, total_bytes=MIN_TOTAL_BYTES)
    second = build_site(tmp_path, seed=2, total_bytes=MIN_TOTAL_BYTES)
    assert first != second
    assert load_manifest(tmp_path) == second
    names = sorted(path.name for path in tmp_path.iterdir())
    assert names == ["css", "img", "index.html", "js", MANIFEST_NAME]


def valid_document() -> dict:
    manifest = SiteManifest(
        index="index.html",
        files=(
            SiteFile("index.html", 10, "a" * 64, "text/html; charset=utf-8"),
            SiteFile("img/photo-1.jpg", 20, "0123456789abcdef" * 4, "image/jpeg"),
        ),
        seed=3,
        total_bytes=30,
    )
    document: dict = json.loads(manifest.to_json())
    return document


def _remove(key):
    def change(document):
        del document[key]

    return change


def _remove_file_key(number, key):
    def change(document):
        del document["files"][number][key]

    return change


def _set(key, value):
    def change(document):
        document[key] = value

    return change


def _set_file_key(number, key, value):
    def change(document):
        document["files"][number][key] = value

    return change


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (_remove("files"), "missing key 'files'"),
        (_remove("index"), "missing key 'index'"),
        (_remove("seed"), "missing key 'seed'"),
        (_remove("total_bytes"), "missing key 'total_bytes'"),
        (_remove("format_version"), "missing key 'format_version'"),
        (_remove_file_key(1, "sha256"), "missing key 'files[1].sha256'"),
        (_remove_file_key(0, "size_bytes"), "missing key 'files[0].size_bytes'"),
        (_remove_file_key(1, "path"), "missing key 'files[1].path'"),
        (_remove_file_key(1, "content_type"), "missing key 'files[1].content_type'"),
        (_set("seed", "3"), "key 'seed' must be int, not str"),
        (_set("seed", True), "key 'seed' must be int, not bool"),
        (_set("files", {}), "key 'files' must be list, not dict"),
        (_set_file_key(1, "size_bytes", -20), "key 'files[1].size_bytes' must not be negative"),
        (_set_file_key(1, "size_bytes", 2.5), "key 'files[1].size_bytes' must be int, not float"),
        (_set_file_key(1, "sha256", "A" * 64), "key 'files[1].sha256' is not 64 lowercase hex"),
        (_set_file_key(1, "sha256", "ab"), "key 'files[1].sha256' is not 64 lowercase hex"),
        (_set_file_key(1, "path", "../etc/passwd"), "key 'files[1].path' is not a relative path"),
        (_set_file_key(1, "path", "/etc/passwd"), "key 'files[1].path' is not a relative path"),
        (_set_file_key(1, "path", "img//x.jpg"), "key 'files[1].path' is not a relative path"),
        (_set_file_key(1, "path", "index.html"), "key 'files[1].path' repeats 'index.html'"),
        (_set("index", "home.html"), "key 'index' names 'home.html', which is not in 'files'"),
        (_set("total_bytes", 31), "key 'total_bytes' is 31, not the sum"),
        (_set("format_version", 2), "key 'format_version' is 2, newer than this agent reads"),
    ],
)
def test_manifest_errors_name_the_file_and_key(tmp_path, change, expected):
    document = valid_document()
    change(document)
    (tmp_path / MANIFEST_NAME).write_text(json.dumps(document))
    with pytest.raises(SiteError) as caught:
        load_manifest(tmp_path)
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / MANIFEST_NAME}: ")
    assert expected in message
    assert "\n" not in message


def test_a_valid_manifest_round_trips_and_unknown_keys_are_ignored():
    document = valid_document()
    document["comment"] = "added by a later version"
    manifest = parse_manifest(json.dumps(document))
    assert manifest.by_path()["img/photo-1.jpg"].size_bytes == 20
    assert parse_manifest(manifest.to_json()) == manifest


def test_missing_manifest_names_the_file(tmp_path):
    with pytest.raises(SiteError, match=re.escape(str(tmp_path / MANIFEST_NAME))) as caught:
        load_manifest(tmp_path)
    assert "No such file" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"files": [', "not valid JSON (line 1, column 12"),
        ("", "not valid JSON (line 1, column 1"),
        ("[1, 2]", "must hold a JSON object"),
    ],
)
def test_bad_json_names_the_file_and_position(tmp_path, text, expected):
    (tmp_path / MANIFEST_NAME).write_text(text)
    with pytest.raises(SiteError) as caught:
        load_manifest(tmp_path)
    assert str(caught.value).startswith(f"{tmp_path / MANIFEST_NAME}: ")
    assert expected in str(caught.value)


def test_a_manifest_that_is_not_utf8_is_refused(tmp_path):
    (tmp_path / MANIFEST_NAME).write_bytes(b"\xff\xfe{")
    with pytest.raises(SiteError, match="not UTF-8"):
        load_manifest(tmp_path)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("index.html", "text/html; charset=utf-8"),
        ("a/b/PAGE.HTM", "text/html; charset=utf-8"),
        ("css/style.css", "text/css; charset=utf-8"),
        ("js/app.js", "text/javascript; charset=utf-8"),
        ("img/photo-1.jpg", "image/jpeg"),
        ("img/photo.JPEG", "image/jpeg"),
        ("manifest.json", "application/json"),
        ("README", "application/octet-stream"),
        ("archive.tar.gz", "application/octet-stream"),
    ],
)
def test_content_type_by_extension(path, expected):
    assert content_type_for(path) == expected


# --- every file valid of its type -------------------------------------------------------------


def test_page_references_exactly_the_seven_subresources(small_site):
    directory, manifest = small_site
    page = read_page((directory / "index.html").read_bytes())
    assert page.doctype.lower() == "doctype html"
    assert page.errors == []
    assert page.open == []
    assert page.stylesheets == ["css/style.css"]
    assert page.scripts == ["js/vendor.js", "js/app.js"]
    assert [src for src, _, _ in page.images] == IMAGES
    referenced = [*page.stylesheets, *page.scripts, *(src for src, _, _ in page.images)]
    assert len(referenced) == 7
    assert sorted(referenced) == sorted(set(manifest.by_path()) - {"index.html"})
    for path in referenced:
        assert (directory / path).is_file()


def test_the_agents_client_finds_the_same_subresources(small_site):
    directory, manifest = small_site
    html = (directory / "index.html").read_text("ascii")
    found = subresource_paths(html, "/index.html")
    assert found == ["/css/style.css", "/js/vendor.js", "/js/app.js", *(f"/{p}" for p in IMAGES)]
    assert {path.lstrip("/") for path in found} == set(manifest.by_path()) - {"index.html"}


def _images_match_the_page(directory: Path) -> None:
    page = read_page((directory / "index.html").read_bytes())
    for src, width, height in page.images:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            image = Image.open(io.BytesIO((directory / src).read_bytes()))
            image.load()
        assert image.format == "JPEG"
        assert image.mode == "RGB"
        assert image.size == (width, height)
        assert image.info.get("progressive") is None
        # Noise over a scene, not a flat fill: the picture really varies.
        low, high = image.convert("L").getextrema()
        assert high - low > 64, src


def test_images_decode_with_pillow_to_the_declared_size(small_site):
    _images_match_the_page(small_site[0])


def test_default_images_decode_with_pillow_to_the_declared_size(default_site):
    _images_match_the_page(default_site[0])


def test_images_are_baseline_jpegs_whose_bytes_are_the_scan(small_site, default_site):
    for directory, _ in (small_site, default_site):
        for path in IMAGES:
            data = (directory / path).read_bytes()
            markers, restarts, scan_bytes = jpeg_structure(data)
            # SOI/APP0 JFIF, DQT, SOF0 (baseline), DHT, DRI, SOS: no comment or padding segment.
            assert markers == [0xE0, 0xDB, 0xC0, 0xC4, 0xDD, 0xDA]
            assert scan_bytes > len(data) - 1024
            height = struct.unpack(">H", data[data.index(b"\xff\xc0") + 5 :][:2])[0]
            assert restarts == height // 8 - 1  # one restart interval per row of blocks


def test_images_decode_with_libjpeg_without_warnings(small_site, default_site):
    require_tool("djpeg")
    for directory, _ in (small_site, default_site):
        for path in IMAGES:
            done = subprocess.run(
                ["djpeg", "-outfile", "/dev/null", str(directory / path)],
                capture_output=True,
                check=False,
            )
            # djpeg exits 2 on any libjpeg warning (corrupt data, extraneous bytes).
            assert (done.returncode, done.stderr) == (0, b""), path


def test_scripts_are_valid_javascript(small_site):
    require_tool("node")
    directory, _ = small_site
    for path in ("js/vendor.js", "js/app.js"):
        done = subprocess.run(
            ["node", "--check", str(directory / path)], capture_output=True, check=False
        )
        assert done.returncode == 0, done.stderr.decode()
        assert (directory / path).read_bytes().startswith(b'"use strict";\n')


def test_stylesheet_is_a_sequence_of_rules(small_site):
    directory, _ = small_site
    css = (directory / "css/style.css").read_text("ascii")
    without_comments = re.sub(r"/\*.*?\*/", "", css, flags=re.DOTALL)
    rule = r"\s*[^{}]+\{(?:\s*[a-z-]+\s*:\s*[^;{}]+;)*\s*\}"
    assert re.fullmatch(rf"(?:{rule})+\s*", without_comments)
    assert len(re.findall(rule, without_comments)) > 10


def test_text_files_are_ascii_and_end_with_a_newline(small_site):
    directory, _ = small_site
    for path in TEXT_TYPES:
        data = (directory / path).read_bytes()
        assert data.isascii(), path
        assert data.endswith(b"\n"), path


# --- the JPEG encoder and its Huffman tables --------------------------------------------------


@pytest.mark.parametrize("target", [2_000, 10_000, 123_457, 600_000])
@pytest.mark.parametrize("aspect", [(3, 2), (2, 3), (1, 1)])
def test_encoder_lands_just_under_its_target_in_shape(target, aspect):
    image = encode_jpeg(ByteStream(f"test/{target}"), target, aspect)
    # Under by at most about one row of blocks' worth at the bottom edge.
    assert target - max(target // 100, 256) <= len(image.data) <= target
    assert image.width_px % 8 == 0 and image.height_px % 8 == 0
    ratio = (image.width_px / image.height_px) / (aspect[0] / aspect[1])
    assert 0.7 < ratio < 1.4
    decoded = Image.open(io.BytesIO(image.data))
    decoded.load()
    assert decoded.size == (image.width_px, image.height_px)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), model=st.sampled_from([LUMA, CHROMA]))
def test_drawn_blocks_stay_inside_the_block(data, model):
    raw = data.draw(st.binary(min_size=model.bytes_per_block, max_size=model.bytes_per_block))
    tokens = _draw_tokens(model, raw)
    coded = [symbol for symbol, _ in tokens if symbol != EOB]
    position = sum((symbol >> 4) + 1 for symbol in coded)
    assert position <= LAST_AC_INDEX
    # EOB ends every block that stops short of the last coefficient, and only those.
    assert (tokens[-1][0] == EOB) == (position < LAST_AC_INDEX)
    assert EOB not in [symbol for symbol, _ in tokens[:-1]]
    for symbol, bits in tokens:
        assert len(bits) == symbol & 0x0F
        assert symbol == EOB or 1 <= symbol & 0x0F <= 10


def canonical_codes(counts, values):
    codes, code, position = {}, 0, 0
    for length, count in enumerate(counts, start=1):
        for _ in range(count):
            codes[values[position]] = format(code, f"0{length}b")
            position += 1
            code += 1
        code <<= 1
    return codes


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.integers(min_value=0, max_value=255),
        st.one_of(
            st.integers(min_value=1, max_value=10), st.integers(min_value=1, max_value=2**40)
        ),
        min_size=1,
        max_size=256,
    )
)
def test_huffman_tables_are_valid_for_baseline_decoders(frequencies):
    table = build_table(frequencies)
    assert len(table.counts) == MAX_CODE_BITS
    assert sum(table.counts) == len(table.values) == len(frequencies)
    assert sorted(table.values) == sorted(frequencies)
    # The codes are exactly those a decoder derives from the DHT segment (counts + values).
    assert table.codes == canonical_codes(table.counts, table.values)
    codes = sorted(table.codes.values())
    for shorter, longer in itertools.pairwise(codes):
        assert not longer.startswith(shorter)
    assert all(len(code) <= MAX_CODE_BITS and set(code) != {"1"} for code in codes)
    assert sum(2.0 ** -len(code) for code in codes) < 1


def test_huffman_gives_frequent_symbols_short_codes():
    table = build_table({0: 1000, 1: 10, 2: 10, 3: 1})
    assert len(table.codes[0]) < len(table.codes[3])


@pytest.mark.parametrize("frequencies", [{}, {256: 1}, {1: 0}])
def test_huffman_rejects_impossible_alphabets(frequencies):
    with pytest.raises(ValueError, match="Huffman"):
        build_table(frequencies)


def test_fetch_and_serve_processes_leave_the_site_builder_unloaded():
    """The builder's JPEG tables cost each process about 5 MiB of peak RSS, a measured result;
    the fetch and serve paths (both engines) read manifests and content types only."""
    probe = (
        "import sys\n"
        "import agent.client.run, agent.server.app, agent.engines.nghttp2.cli_support\n"
        "import agent.workloads.page.client, agent.workloads.page.server\n"
        "from agent.site import MANIFEST_NAME, content_type_for, load_manifest\n"
        "print(sorted(m for m in sys.modules if m.startswith('agent.site.')))\n"
        "from agent.site import build_site\n"
        "print('agent.site.builder' in sys.modules, build_site.__module__)\n"
    )
    lines = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert lines[0] == "['agent.site.content_types', 'agent.site.limits', 'agent.site.manifest']"
    assert lines[1] == "True agent.site.builder"
