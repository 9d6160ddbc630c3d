"""Find a page's subresources the way a browser (and `nghttp -a`) does: stylesheets, scripts and
images referenced from the HTML, resolved against the page's path, in document order, once each."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit


class _SubresourceParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value for name, value in attrs if value is not None}
        if tag == "link" and "stylesheet" in values.get("rel", "").lower().split():
            target = values.get("href")
        elif tag in ("script", "img"):
            target = values.get("src")
        else:
            return
        if target:
            self.found.append(target.strip())

    handle_startendtag = handle_starttag


def subresource_paths(html: str, page_path: str) -> list[str]:
    """Same-origin subresource paths (`/css/site.css`) referenced by `html` served at `page_path`.

    Absolute URLs to other origins and `data:` URLs are not fetched, as the page's own connection
    cannot carry them.
    """
    parser = _SubresourceParser()
    parser.feed(html)
    parser.close()
    base = f"http://origin{page_path}"
    seen: set[str] = set()
    paths: list[str] = []
    for reference in parser.found:
        joined = urlsplit(urljoin(base, reference))
        if joined.scheme != "http" or joined.netloc != "origin":
            continue
        path = joined.path + (f"?{joined.query}" if joined.query else "")
        if path not in seen:
            seen.add(path)
            paths.append(path)
    return paths
