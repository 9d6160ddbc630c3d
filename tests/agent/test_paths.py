from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.paths import request_segments, resolve_under_root


@pytest.fixture
def root(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    (site / "css").mkdir(parents=True)
    (site / "index.html").write_text("<html></html>")
    (site / "css" / "a.css").write_text("body{}")
    (tmp_path / "secret.txt").write_text("secret")
    os.symlink(tmp_path / "secret.txt", site / "escape.txt")
    os.symlink(site / "css" / "a.css", site / "inside.css")
    os.symlink(tmp_path, site / "updir")
    return site


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/", "index.html"),
        ("/index.html", "index.html"),
        ("/css/a.css", "css/a.css"),
        ("/css/a.css?v=3#top", "css/a.css"),
        ("/css//a.css", "css/a.css"),
        ("/%63ss/a.css", "css/a.css"),
        ("/inside.css", "css/a.css"),
    ],
)
def test_serves_files_under_the_root(root: Path, path: str, expected: str) -> None:
    assert resolve_under_root(root, path) == (root / expected).resolve()


@pytest.mark.parametrize(
    "path",
    [
        "/../secret.txt",
        "/css/../../secret.txt",
        "/%2e%2e/secret.txt",
        "/%2E%2E%2Fsecret.txt",
        "/..%2fsecret.txt",
        "/css/%2e%2e/%2e%2e/secret.txt",
        "//etc/passwd",
        "/%2fetc/passwd",
        "/C:/Windows/win.ini",
        "/css\\..\\..\\secret.txt",
        "/index.html%00.css",
        "/escape.txt",
        "/updir/secret.txt",
        "/missing.html",
        "/css",
        "relative/path",
        "",
        "/%ff%fe",
    ],
)
def test_refuses_anything_that_leaves_the_root_or_is_not_a_file(root: Path, path: str) -> None:
    assert resolve_under_root(root, path) is None


@settings(max_examples=300)
@given(st.text(alphabet=st.sampled_from(list("./%2eEfF5c\\:a~")), max_size=30))
def test_any_resolved_path_is_a_file_inside_the_root(path: str) -> None:
    root = Path(__file__).parent / "_paths_root"
    resolved = resolve_under_root(root, "/" + path)
    if resolved is not None:
        assert resolved.is_relative_to(root.resolve())
        assert resolved.is_file()


@given(st.text(max_size=40))
def test_segments_never_contain_dot_segments(path: str) -> None:
    try:
        segments = request_segments("/" + path)
    except UnicodeDecodeError:
        return
    if segments is not None:
        assert all(s not in ("", ".", "..") and "/" not in s for s in segments)
