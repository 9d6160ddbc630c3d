from __future__ import annotations

from agent.html_links import subresource_paths


def test_finds_stylesheets_scripts_and_images_in_order_once_each() -> None:
    html = """<!doctype html><html><head>
    <link rel="icon" href="/favicon.ico">
    <link rel="preload stylesheet" href="css/site.css">
    <script src="js/a.js"></script><script>inline()</script>
    </head><body><img src="img/1.jpg"><img src='/img/2.jpg'/><img src="img/1.jpg">
    <script src="https://cdn.example/x.js"></script><img src="data:image/png;base64,AA==">
    <img src="//other.host/y.jpg"><img src="../up.jpg?v=2"></body></html>"""
    assert subresource_paths(html, "/pages/index.html") == [
        "/pages/css/site.css",
        "/pages/js/a.js",
        "/pages/img/1.jpg",
        "/img/2.jpg",
        "/up.jpg?v=2",
    ]


def test_page_at_root() -> None:
    assert subresource_paths('<img src="a.jpg">', "/") == ["/a.jpg"]
