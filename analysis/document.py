"""A report as data (headings, paragraphs, tables, figures, links) and its two renderings.

The report is assembled once as a list of blocks; Markdown and HTML are pure functions of that
list, so the two files always say the same thing. The HTML embeds every PNG (base64), so it
stays readable when mailed alone; SVGs are linked relative to the report.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]


@dataclass(frozen=True)
class Links:
    items: tuple[tuple[str, str], ...]  # (text, relative href)


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""


@dataclass(frozen=True)
class Image:
    png: str  # relative to the report's directory
    svg: str
    caption: str


Block = Heading | Paragraph | Bullets | Links | Table | Image


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(blocks: Sequence[Block]) -> str:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"{'#' * block.level} {block.text}")
        elif isinstance(block, Paragraph):
            out.append(block.text)
        elif isinstance(block, Bullets):
            out.append("\n".join(f"- {item}" for item in block.items))
        elif isinstance(block, Links):
            out.append("\n".join(f"- [{text}]({href})" for text, href in block.items))
        elif isinstance(block, Table):
            lines = [
                "| " + " | ".join(_md_cell(h) for h in block.header) + " |",
                "|" + "|".join(" --- " for _ in block.header) + "|",
                *("| " + " | ".join(_md_cell(c) for c in row) + " |" for row in block.rows),
            ]
            if block.caption:
                lines.insert(0, f"*{block.caption}*\n")
            out.append("\n".join(lines))
        else:
            alt = Path(block.png).stem
            out.append(f"![{alt}]({block.png})\n\n*{block.caption}* ([SVG]({block.svg}))")
    return "\n\n".join(out) + "\n"


_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em;
       color: #222; line-height: 1.4; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; }
th { background: #f3f3f3; }
td:first-child, th:first-child { text-align: left; }
caption { caption-side: top; text-align: left; font-style: italic; padding-bottom: 0.3em; }
figure { margin: 1em 0 2em; }
figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.9em; color: #444; }
td.agrees { background: #e6f4e6; } td.differs { background: #fbe9e7; }
td.partly { background: #fff6dd; }
"""

# A verdict cell's text -> its class (colour).
_VERDICT_CLASSES = {
    "agrees": "agrees",
    "differs": "differs",
    "same direction": "partly",
    "inconclusive": "partly",
}


def _html_table(block: Table) -> str:
    caption = f"<caption>{html.escape(block.caption)}</caption>" if block.caption else ""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in block.header)
    rows = []
    for row in block.rows:
        cells = "".join(
            f'<td class="{_VERDICT_CLASSES[c]}">{html.escape(c)}</td>'
            if c in _VERDICT_CLASSES
            else f"<td>{html.escape(c)}</td>"
            for c in row
        )
        rows.append(f"<tr>{cells}</tr>")
    return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def to_html(blocks: Sequence[Block], title: str, base: Path) -> str:
    """The blocks as one HTML page; images under `base` are embedded as data URIs."""
    body: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            body.append(f"<h{block.level}>{html.escape(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            body.append(f"<p>{html.escape(block.text)}</p>")
        elif isinstance(block, Bullets):
            items = "".join(f"<li>{html.escape(item)}</li>" for item in block.items)
            body.append(f"<ul>{items}</ul>")
        elif isinstance(block, Links):
            items = "".join(
                f'<li><a href="{html.escape(href)}">{html.escape(text)}</a></li>'
                for text, href in block.items
            )
            body.append(f"<ul>{items}</ul>")
        elif isinstance(block, Table):
            body.append(_html_table(block))
        else:
            data = base64.b64encode((base / block.png).read_bytes()).decode("ascii")
            body.append(
                f'<figure><img alt="{html.escape(block.caption)}" '
                f'src="data:image/png;base64,{data}">'
                f"<figcaption>{html.escape(block.caption)} "
                f'(<a href="{html.escape(block.svg)}">SVG</a>)</figcaption></figure>'
            )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )
