from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[2] / "analysis" / "notebooks" / "study_figures.ipynb"


def test_the_notebook_reproduces_the_figures_headless(
    runs_root: Path, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("H2IOT_RUN", str(runs_root / "study"))
    monkeypatch.setenv("H2IOT_NOTEBOOK_OUT", str(tmp_path / "figures"))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=180,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # the kernel inherits H2IOT_RUN and H2IOT_NOTEBOOK_OUT
    text = "".join(
        output.get("text", "")
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
    )
    assert "46 attempts, 45 ok rows, 1 failed attempts" in text
    assert "the analysis package agrees on 108 metric x point rows" in text
    assert "(study: +42 %)" in text and "(study: +300 %)" in text
    saved = sorted(p.stem for p in (tmp_path / "figures").glob("*.png"))
    assert saved == [
        "figure1_client",
        "figure2_server",
        "figure3_cpu_pct",
        "frames_per_byte",
        "power_traces",
    ]
