"""A report as data (headings, paragraphs, tables, figures, links, folded sections) and its two
renderings.

The report is assembled once as a list of blocks; Markdown and HTML are pure functions of that
list, so the two files always say the same thing. The HTML embeds every PNG (base64), so it
stays readable when mailed alone; SVGs are linked relative to the report. A `Details` section is
folded in HTML (<details>, its title the <summary>) and a plain section in Markdown, which has
no folding. The HTML fits a 1280 px wide window: a table wider than the page scrolls inside its
own box, and a `lead` figure (the report's headline) is kept within the first screen's height.
"""

from __future__ import annotations

import base64
import html
import re
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
    warning: bool = False  # warnings about how to read the results: set apart in HTML


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
    lead: bool = False  # the headline figure: drawn no taller than most of the first screen


@dataclass(frozen=True)
class Details:
    """A section folded in HTML: `title` is its heading (at `level`), shown when folded."""

    title: str
    blocks: tuple[Block, ...]
    level: int = 2


Block = Heading | Paragraph | Bullets | Links | Table | Image | Details


def folded(section: Sequence[Block]) -> list[Block]:
    """A section that opens with its heading, as one folded `Details`; others as they are."""
    if not section or not isinstance(section[0], Heading):
        return list(section)
    heading = section[0]
    return [Details(heading.text, tuple(section[1:]), heading.level)]


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_parts(blocks: Sequence[Block]) -> list[str]:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Details):
            out.append(f"{'#' * block.level} {block.title}")
            out += _md_parts(block.blocks)
        elif isinstance(block, Heading):
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
    return out


def to_markdown(blocks: Sequence[Block]) -> str:
    return "\n\n".join(_md_parts(blocks)) + "\n"


_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1200px; margin: 1em auto; padding: 0 1em;
       color: #222; line-height: 1.4; overflow-wrap: break-word; }
h1 { font-size: 1.6em; margin: 0.3em 0; }
div.table { max-width: 100%; overflow-x: auto; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left; }
th { background: #f3f3f3; }
td.num { text-align: right; }
h2 { margin: 0.9em 0 0.4em; }
caption { caption-side: top; text-align: left; font-style: italic; padding-bottom: 0.3em; }
figure { margin: 1em 0 2em; }
figure img { max-width: 100%; border: 1px solid #eee; }
figure.lead { margin: 0.5em 0 1em; }
figure.lead img { max-height: 50vh; }
figcaption { font-size: 0.9em; color: #444; }
ul.caveats { background: #fff6dd; border-left: 4px solid #e0a800; padding: 0.3em 0.8em 0.3em 2em;
             margin: 0.3em 0; font-size: 0.9em; }
details { margin: 0.3em 0; }
details > summary { cursor: pointer; }
details > summary > h2, details > summary > h3 { display: inline; }
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


# A cell that is one number (or "-", no value) aligns right, under the others of its column.
_NUMBER = re.compile(r"^(?:[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?|-)$")


def _html_cell(text: str) -> str:
    if text in _VERDICT_CLASSES:
        return f'<td class="{_VERDICT_CLASSES[text]}">{html.escape(text)}</td>'
    if _NUMBER.match(text):
        return f'<td class="num">{html.escape(text)}</td>'
    return f"<td>{html.escape(text)}</td>"


def _html_table(block: Table) -> str:
    caption = f"<caption>{html.escape(block.caption)}</caption>" if block.caption else ""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in block.header)
    rows = []
    for row in block.rows:
        cells = "".join(_html_cell(c) for c in row)
        rows.append(f"<tr>{cells}</tr>")
    return (
        f'<div class="table"><table>{caption}<thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _html_parts(blocks: Sequence[Block], base: Path) -> list[str]:
    body: list[str] = []
    for block in blocks:
        if isinstance(block, Details):
            title = f"<h{block.level}>{html.escape(block.title)}</h{block.level}>"
            inner = "\n".join(_html_parts(block.blocks, base))
            body.append(f"<details><summary>{title}</summary>\n{inner}\n</details>")
        elif isinstance(block, Heading):
            body.append(f"<h{block.level}>{html.escape(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            body.append(f"<p>{html.escape(block.text)}</p>")
        elif isinstance(block, Bullets):
            items = "".join(f"<li>{html.escape(item)}</li>" for item in block.items)
            kind = ' class="caveats"' if block.warning else ""
            body.append(f"<ul{kind}>{items}</ul>")
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
            lead = ' class="lead"' if block.lead else ""
            body.append(
                f'<figure{lead}><img alt="{html.escape(block.caption)}" '
                f'src="data:image/png;base64,{data}">'
                f"<figcaption>{html.escape(block.caption)} "
                f'(<a href="{html.escape(block.svg)}">SVG</a>)</figcaption></figure>'
            )
    return body


def to_html(blocks: Sequence[Block], title: str, base: Path) -> str:
    """The blocks as one HTML page; images under `base` are embedded as data URIs."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head>\n<body>\n"
        + "\n".join(_html_parts(blocks, base))
        + "\n</body></html>\n"
    )
