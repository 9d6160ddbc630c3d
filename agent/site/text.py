"""The site's text files: a stylesheet, two scripts and the page, each exactly a given size.

Every file is ordinary, valid text of its kind, assembled from small generated units (CSS rules,
JavaScript functions and data tables, HTML sections). Units are added while they fit; the few
bytes left over become a comment (or whitespace when even a comment will not fit), so each file
has exactly the size the site's plan gives it. Output is ASCII, so characters are bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from agent.site._stream import ByteStream

_WORDS = (
    "sensor",
    "node",
    "gateway",
    "packet",
    "frame",
    "stream",
    "window",
    "setting",
    "energy",
    "joule",
    "battery",
    "current",
    "voltage",
    "sample",
    "meter",
    "latency",
    "header",
    "payload",
    "channel",
    "mesh",
    "field",
    "device",
    "client",
    "server",
    "request",
    "response",
    "flow",
    "control",
    "budget",
    "radio",
    "link",
    "hop",
    "duty",
    "cycle",
    "sleep",
    "wake",
    "buffer",
    "queue",
    "timer",
    "clock",
    "drift",
    "reading",
    "measure",
    "trial",
    "median",
    "interval",
    "signal",
    "noise",
    "board",
    "supply",
    "thermal",
    "load",
    "core",
    "cache",
    "memory",
    "page",
    "image",
    "style",
    "script",
    "table",
    "update",
    "report",
)
_CHUNK = 4096


class _Picker:
    """Deterministic choices drawn from a byte stream."""

    def __init__(self, stream: ByteStream) -> None:
        self._stream = stream
        self._data = b""
        self._offset = 0

    def number(self, limit: int) -> int:
        """A number in 0 .. limit - 1 (limit <= 65536)."""
        if self._offset + 2 > len(self._data):
            self._data = self._stream.take(_CHUNK)
            self._offset = 0
        value = self._data[self._offset] << 8 | self._data[self._offset + 1]
        self._offset += 2
        return value % limit

    def choice(self, options: Sequence[str]) -> str:
        return options[self.number(len(options))]

    def words(self, count: int) -> str:
        return " ".join(self.choice(_WORDS) for _ in range(count))

    def name(self) -> str:
        return f"{self.choice(_WORDS)}{self.choice(_WORDS).title()}{self.number(1000)}"


@dataclass(frozen=True)
class _Syntax:
    open_comment: str
    close_comment: str


_C_STYLE = _Syntax("/* ", " */\n")  # CSS and JavaScript alike
_HTML = _Syntax("<!-- ", " -->\n")


def _filler(picker: _Picker, length: int) -> str:
    """Whole words, then dots, exactly `length` characters."""
    text = picker.choice(_WORDS)[:length]
    while True:
        word = picker.choice(_WORDS)
        if len(text) + 1 + len(word) > length:
            return text.ljust(length, ".")
        text += " " + word


def _assemble(
    head: str,
    tail: str,
    units: Iterator[str],
    *,
    size_bytes: int,
    syntax: _Syntax,
    picker: _Picker,
) -> bytes:
    room = size_bytes - len(head) - len(tail)
    if room < 0:
        raise ValueError(
            f"{size_bytes} bytes cannot hold this file's skeleton ({len(head + tail)})"
        )
    body: list[str] = []
    for unit in units:
        if len(unit) > room:
            break
        body.append(unit)
        room -= len(unit)
    overhead = len(syntax.open_comment) + len(syntax.close_comment)
    if room > overhead:
        rest = syntax.open_comment + _filler(picker, room - overhead) + syntax.close_comment
    else:
        rest = "\n" * room
    return (head + "".join(body) + rest + tail).encode("ascii")


def _forever(make: Callable[[int], str]) -> Iterator[str]:
    number = 0
    while True:
        yield make(number)
        number += 1


def render_css(stream: ByteStream, size_bytes: int) -> bytes:
    picker = _Picker(stream)
    head = (
        ":root {\n  --accent: #2f6f9f;\n  --text: #1d2a33;\n}\n"
        "body {\n  margin: 0;\n  font-family: system-ui, sans-serif;\n  color: var(--text);\n}\n"
        "figure img {\n  max-width: 100%;\n  height: auto;\n}\n"
    )

    def rule(number: int) -> str:
        colour = picker.number(0x1000000)
        return (
            f".{picker.choice(_WORDS)}-{number} .{picker.choice(_WORDS)} {{\n"
            f"  margin: {picker.number(32)}px {picker.number(32)}px;\n"
            f"  padding: {picker.number(16)}px;\n"
            f"  color: #{colour:06x};\n"
            f"  font-size: {1 + picker.number(8) / 8:.3f}rem;\n"
            f"  border-radius: {picker.number(12)}px;\n"
            "}\n"
        )

    return _assemble(
        head, "", _forever(rule), size_bytes=size_bytes, syntax=_C_STYLE, picker=picker
    )


def render_app_js(stream: ByteStream, size_bytes: int) -> bytes:
    picker = _Picker(stream)
    head = '"use strict";\n'
    tail = (
        'document.addEventListener("DOMContentLoaded", () => {\n'
        '  document.documentElement.dataset.ready = "1";\n'
        "});\n"
    )

    def function(number: int) -> str:
        return (
            f"function {picker.name()}_{number}(items, width) {{\n"
            "  let total = 0;\n"
            "  for (const item of items) {\n"
            f"    total += (item.w * {picker.number(97) + 3} + width) % {picker.number(89) + 11};\n"
            "  }\n"
            f"  // {picker.words(6)}\n"
            "  return total / Math.max(1, items.length);\n"
            "}\n"
        )

    return _assemble(
        head, tail, _forever(function), size_bytes=size_bytes, syntax=_C_STYLE, picker=picker
    )


def render_vendor_js(stream: ByteStream, size_bytes: int) -> bytes:
    picker = _Picker(stream)
    head = '"use strict";\nconst TABLES = {};\n'
    tail = "Object.freeze(TABLES);\n"

    def table(number: int) -> str:
        values = ", ".join(str(picker.number(65536)) for _ in range(16))
        return f'TABLES["{picker.choice(_WORDS)}{number}"] = [{values}];\n'

    return _assemble(
        head, tail, _forever(table), size_bytes=size_bytes, syntax=_C_STYLE, picker=picker
    )


@dataclass(frozen=True)
class PageImage:
    path: str
    width_px: int
    height_px: int


def render_html(
    stream: ByteStream,
    size_bytes: int,
    *,
    title: str,
    stylesheet: str,
    scripts: Sequence[str],
    images: Sequence[PageImage],
) -> bytes:
    picker = _Picker(stream)
    script_tags = "".join(f'<script src="{path}" defer></script>\n' for path in scripts)
    figures = "".join(
        f'<figure><img src="{image.path}" width="{image.width_px}" height="{image.height_px}" '
        f'alt="{picker.words(3)}"></figure>\n'
        for image in images
    )
    head = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{title}</title>\n"
        f'<link rel="stylesheet" href="{stylesheet}">\n{script_tags}'
        f"</head>\n<body>\n<main>\n<h1>{title}</h1>\n{figures}"
    )
    tail = "</main>\n</body>\n</html>\n"

    def section(number: int) -> str:
        return (
            f'<section id="s{number}">\n<h2>{picker.words(4).capitalize()}</h2>\n'
            f"<p>{picker.words(40 + picker.number(40)).capitalize()}.</p>\n</section>\n"
        )

    return _assemble(
        head, tail, _forever(section), size_bytes=size_bytes, syntax=_HTML, picker=picker
    )
