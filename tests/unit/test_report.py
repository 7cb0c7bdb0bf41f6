"""`report`: report.md states baseline and best, progress.png and report.html are drawn."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import Runner


def test_report_states_baseline_best_and_draws_the_chart(
    finished_toy: Path, invoke: Runner
) -> None:
    result = invoke(finished_toy, "report", "--json")
    assert result.returncode == 0, result.stderr
    paths = json.loads(result.stdout)
    markdown = Path(paths["markdown"]).read_text()
    assert "- baseline: 7" in markdown and "- best: 0 (attempt 7" in markdown
    assert "- stop reason: target" in markdown
    assert "### crash (1)" in markdown and "### scope_violation (1)" in markdown
    assert "bench.py: sha256" in markdown
    png = Path(paths["image"]).read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    page = Path(paths["html"]).read_text()
    assert "data:image/png;base64," in page and "set N to 3" in page
