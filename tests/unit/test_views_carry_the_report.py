"""The dashboard and report.html carry what report.md has, looked at in a real headless
browser: labelled axes, a legend, the report's status colours, gain and reason columns,
samples and spread per attempt; report.html's kept changes, failures and environment."""

from __future__ import annotations

import dataclasses
import html
import re
import shutil
import statistics
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoresearch.attempt import Status
from autoresearch.store.ledger import Ledger
from autoresearch.views.dashboard import make_server
from autoresearch.views.render import STATUS_COLOURS
from autoresearch.views.report import write_report

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "ledger_v1"
# Repeated samples for two attempts, so that a spread is there to show.
SAMPLES = {0: (7.0, 7.2, 6.8), 1: (4.1, 3.9, 4.0), 8: (1.0, 1.25, 0.75)}


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("chromium is not installed")


def browse(url: str, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            "--virtual-time-budget=10000",
            *extra,
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy campaign of 0.1.0, its ledger rewritten (hash chain and all) with repeated
    samples for attempts 0, 1 and 8."""
    repo = tmp_path_factory.mktemp("views") / "repo"
    subprocess.run(
        ["git", "clone", "-q", str(FIXTURES / "toy.bundle"), str(repo)],
        check=True,
        capture_output=True,
    )
    state_dir = repo / ".autoresearch" / "toy"
    state_dir.mkdir(parents=True)
    shutil.copy(FIXTURES / "ledger.jsonl", state_dir / "ledger.jsonl")
    shutil.copy(FIXTURES / "state.json", state_dir / "state.json")
    records = Ledger(state_dir).read()
    (state_dir / "ledger.jsonl").unlink()
    ledger = Ledger(state_dir)
    for record in records:
        samples = SAMPLES.get(record.iteration)
        ledger.append(dataclasses.replace(record, samples=samples) if samples else record)
    return repo


@pytest.fixture(scope="module")
def dashboard(campaign: Path) -> Iterator[str]:
    server = make_server(campaign, campaign / ".autoresearch/toy", "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.url()
    server.shutdown()
    server.server_close()


def cells(dom: str, iteration: int) -> list[str]:
    """The text of the table cells of one attempt's row, as the browser left them."""
    rows = re.findall(r'<tr class="attempt [a-z_]+">(.*?)</tr>', dom, re.S)
    for row in rows:
        texts = [
            html.unescape(re.sub(r"<[^>]+>", "", c))
            for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        ]
        if texts and texts[0] == str(iteration):
            return texts
    raise AssertionError(f"no row for attempt {iteration}")


def test_the_dashboard_has_axes_a_legend_and_the_reports_columns(
    dashboard: str, tmp_path: Path
) -> None:
    proc = browse(dashboard, tmp_path / "profile", "--dump-dom")
    dom = proc.stdout
    assert "autoresearch: toy" in dom, proc.stderr[-2000:]
    assert re.search(r'class="axis-label x"[^>]*>attempt<', dom)
    assert re.search(r'class="axis-label y"[^>]*>metric \(lower is better\)<', dom)
    legend = re.findall(r'class="legend-item"[^>]*>([^<]+)<', dom)
    # every status drawn, in the enum's order, and the line
    assert legend == ["best so far", "baseline", "keep", "discard", "guard_failed"]
    header = re.search(r"<thead>(.*?)</thead>", dom, re.S)
    assert header is not None
    assert re.findall(r"<th>([^<]+)</th>", header.group(1)) == [
        "#",
        "status",
        "metric",
        "gain",
        "delta",
        "samples",
        "spread (sd)",
        "description",
        "reason",
    ]
    # attempt 1 lowered the metric by 3 while minimizing: gain +3, delta -3
    kept = cells(dom, 1)
    assert kept[1:7] == ["keep", "4", "+3", "-3", "3", "0.1"]
    assert cells(dom, 8)[5:7] == ["3", f"{statistics.stdev(SAMPLES[8]):.6g}"]
    assert cells(dom, 2)[3:6] == ["-2", "+2", "1"]  # a discard: worse, so a negative gain
    assert cells(dom, 3)[8] == "guard exited with code 1: AssertionError"
    assert cells(dom, 7)[8] == "the proposer exited with code 4"


def test_the_dashboard_draws_each_status_in_the_reports_colour(
    dashboard: str, tmp_path: Path
) -> None:
    """In the browser's own pixels: every status drawn shows the colour of the one table."""
    from PIL import Image

    shot = tmp_path / "shot.png"
    browse(
        dashboard, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1000,800"
    ).check_returncode()
    colours = Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 24) or []
    pixels = {rgb for _, rgb in colours}
    for status in (Status.BASELINE, Status.KEEP, Status.DISCARD, Status.GUARD_FAILED):
        colour = STATUS_COLOURS[status]
        rgb = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
        assert rgb in pixels, (status, colour)


def test_report_html_has_the_sections_of_report_md(campaign: Path, tmp_path: Path) -> None:
    state_dir = campaign / ".autoresearch/toy"
    paths = write_report(state_dir)
    markdown = paths.markdown.read_text()
    proc = browse(paths.html.as_uri(), tmp_path / "profile", "--dump-dom")
    dom = proc.stdout
    assert "Campaign toy" in dom, proc.stderr[-2000:]
    for title in ("Kept changes, by gain", "Failures, by kind", "Environment"):
        assert f"## {title}" in markdown
        assert f">{html.escape(title)}</h2>" in dom.replace("&amp;", "&")
    # the failures report.md lists, attempt by attempt, with their reasons
    listed = re.findall(r"^- (#\d+ .*)$", markdown, re.M)
    assert len(listed) == 5  # four failures, and the guard_failed one as "better, but refused"
    for line in listed:
        assert html.escape(line.replace("\\", ""), quote=False) in dom, line
    for kind in ("guard_failed (1)", "crash (1)", "scope_violation (1)", "proposer_failed (1)"):
        assert f"### {kind}" in markdown and f"<h3>{kind}</h3>" in dom
    # the environment: the same harness digest and interpreter
    digest = re.search(r"bench\.py: sha256 ([0-9a-f]{64})", markdown)
    assert digest is not None and f"bench.py: sha256 {digest.group(1)}" in dom
    interpreter = re.search(r"interpreter: (Python \S+)", markdown)
    assert interpreter is not None and interpreter.group(1) in dom
    # kept changes: both keeps, gain +3 (delta -3)
    kept = dom.split('id="kept"')[1].split("</table>")[0]
    assert kept.count("<tr class=") == 2 and "set N to 7" in kept and "+3" in kept
    # samples and spread per attempt in the attempts table
    attempts = dom.split('id="attempts"')[1].split("</table>")[0]
    assert f"<td>{statistics.stdev(SAMPLES[8]):.6g}</td>" in attempts
    assert 'title="1, 1.25, 0.75">3</td>' in attempts


def test_one_table_of_colours_for_the_chart_the_report_and_the_dashboard(
    campaign: Path,
) -> None:
    from autoresearch.views import dashboard, report

    page = dashboard.page("toy")
    written = write_report(campaign / ".autoresearch/toy").html.read_text()
    for status, colour in STATUS_COLOURS.items():
        rule = re.search(
            r"^([^{\n]*\." + str(status) + r"\b[^{]*)\{ fill: (#[0-9a-f]{6}); \}", page, re.M
        )
        assert rule is not None and rule.group(2) == colour, status
        assert f"background:{colour}'></span>{status}" in written
    assert report.COLORS is STATUS_COLOURS is dashboard.POINT_FILLS
