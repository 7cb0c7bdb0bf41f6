"""Honest output: descriptions are text everywhere, one sign for "better", the dashboard
answers only its own address, and reports that parse."""

from __future__ import annotations

import http.client
import io
import json
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.events import Attempted, Started, Stopped
from autoresearch.store.ledger import Ledger
from autoresearch.views import dashboard
from autoresearch.views.render import Printer, attempts_table, gain
from campaigns import campaign_toml
from conftest import Runner, make_repo

HOSTILE = "x \x1b[2J\x1b]0;owned\x07 [bold]b[/] $\\foo$ <script>alert(1)</script> a|b *e*"


def fake_campaign(tmp_path: Path, direction: str = "minimize") -> Path:
    """A repository with a campaign folder whose ledger holds hostile descriptions."""
    repo = make_repo(
        tmp_path / "repo", {"calc.py": "N = 1\n", "autoresearch.toml": campaign_toml()}
    )
    state_dir = repo / ".autoresearch/toy"
    commit = (repo / ".git/refs/heads/main").read_text().strip()
    ledger = Ledger(state_dir)
    ledger.append(AttemptRecord(0, Status.BASELINE, metric=10.0, commit=commit, samples=(10.0,)))
    ledger.append(
        AttemptRecord(
            1,
            Status.KEEP,
            metric=8.0,
            commit=commit,
            parent=commit,
            description=HOSTILE,
            closed=True,
            delta=-2.0,
            best=8.0,
        )
    )
    ledger.append(
        AttemptRecord(2, Status.CRASH, description=HOSTILE, reason="[red]boom\x1b[0m", closed=True)
    )
    (state_dir / "state.json").write_text(
        json.dumps({"name": "toy", "direction": direction, "stop_reason": "max_iterations"})
    )
    return repo


def test_gain_is_positive_for_an_improvement_in_either_direction() -> None:
    assert gain(-2.0, "minimize") == 2.0 and gain(3.0, "maximize") == 3.0
    assert gain(1.0, "minimize") == -1.0 and gain(None, "maximize") is None


@pytest.mark.parametrize(
    ("direction", "delta", "shown"), [("minimize", -2.0, "+2"), ("maximize", 2.0, "+2")]
)
def test_every_view_shows_the_gain_with_the_raw_delta(
    tmp_path: Path, invoke: Runner, direction: str, delta: float, shown: str
) -> None:
    out = io.StringIO()
    printer = Printer(Console(file=out, width=300, color_system=None))
    summary = {
        "name": "toy",
        "direction": direction,
        "baseline": 10.0,
        "best": 10.0 + delta,
        "best_iteration": 1,
        "delta": delta,
        "improvement_pct": 20.0,
        "counts": {"keep": 1},
    }
    printer(Started(summary, 3, "/w", False))
    record = AttemptRecord(1, Status.KEEP, metric=10.0 + delta, delta=delta, closed=True)
    printer(Attempted(record, 10.0 + delta, 3))
    printer(Stopped("max_iterations", summary, "", "b", "l"))
    text = out.getvalue()
    assert f"gain        {shown} (delta {delta:+g})" in text
    assert f"gain {shown} (+20.00%), delta {delta:+g}" in text
    assert "[keep 1]" in text  # the counts are not read as markup
    repo = fake_campaign(tmp_path, direction)
    status = invoke(repo, "status")
    expected = "gain +2 (+20.00%), delta -2" if direction == "minimize" else "gain -2"
    assert expected in status.stdout


def test_descriptions_never_reach_the_terminal_as_escapes_or_markup(
    tmp_path: Path, invoke: Runner
) -> None:
    repo = fake_campaign(tmp_path)
    for command in (["log"], ["show", "1"], ["show", "2"]):
        result = invoke(repo, *command)
        assert result.returncode == 0, result.stderr
        assert "\x1b" not in result.stdout and "\x07" not in result.stdout
        assert "\\x1b[2J" in result.stdout
    assert "[bold]b[/]" in invoke(repo, "show", "1").stdout
    console = Console(file=io.StringIO(), width=400, record=True, color_system=None)
    console.print(attempts_table(Ledger(repo / ".autoresearch/toy").read()))
    assert "[bold]b[/]" in console.export_text()


def test_the_report_takes_descriptions_as_text(tmp_path: Path, invoke: Runner) -> None:
    repo = fake_campaign(tmp_path)
    result = invoke(repo, "report", "--json")
    assert result.returncode == 0, result.stderr  # "$\foo$" is not mathtext
    paths = json.loads(result.stdout)
    markdown = Path(paths["markdown"]).read_text()
    assert "<script>" not in markdown and "\x1b" not in markdown
    assert "\\<script\\>" in markdown and "a\\|b" in markdown
    page = Path(paths["html"]).read_text()
    assert "<script>alert" not in page
    found = re.search(r'<script type="application/json" id="summary">(.*?)</script>', page, re.S)
    assert found is not None
    summary = json.loads(found.group(1))
    assert summary["best"] == 8.0 and summary["stop_reason"] == "max_iterations"


def test_report_open_without_a_browser_says_where_the_file_is(
    tmp_path: Path, invoke: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    import webbrowser

    repo = fake_campaign(tmp_path)
    monkeypatch.setattr(webbrowser, "_tryorder", [])
    monkeypatch.setattr(webbrowser, "_browsers", {})
    # No browser registered: what a machine without one gives webbrowser.
    result = invoke(repo, "report", "--open")
    assert result.returncode == 0
    page = repo / ".autoresearch/toy/report.html"
    assert "no browser" in result.stderr and str(page) in result.stderr.replace("\n", "")


def test_status_and_log_agree_when_nothing_was_measured(tmp_path: Path, invoke: Runner) -> None:
    repo = make_repo(
        tmp_path / "repo", {"calc.py": "N = 1\n", "autoresearch.toml": campaign_toml()}
    )
    status, log = invoke(repo, "status"), invoke(repo, "log")
    assert status.returncode == log.returncode == 1
    assert "no measurements yet" in status.stderr and "no measurements yet" in log.stderr


def test_dashboard_help_shows_the_default_port(invoke: Runner, tmp_path: Path) -> None:
    assert "8765" in invoke(tmp_path, "dashboard", "--help").stdout


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    monkeypatch.setattr(dashboard, "IDLE_SECONDS", 1.0)
    repo = fake_campaign(tmp_path)
    server = dashboard.make_server(repo, repo / ".autoresearch/toy", "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    TOKENS[int(server.server_address[1])] = server.token
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


# Each served dashboard's token, by port: these requests are the user's, who has it.
TOKENS: dict[int, str] = {}


def request(port: int, path: str, host: str | None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.putrequest("GET", path, skip_host=True)
    if host is not None:
        conn.putheader("Host", host)
    if port in TOKENS:
        conn.putheader("Authorization", f"Bearer {TOKENS[port]}")
    conn.endheaders()
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, body


@pytest.mark.parametrize(
    "host",
    [
        "evil.example:{port}",
        "evil.example",
        "127.0.0.1:1",
        None,
        "localhost.evil.example:{port}",
        "127.0.0.1:{port}.evil",
    ],
)
def test_the_dashboard_refuses_a_foreign_host(served: int, host: str | None) -> None:
    for path in ("/", "/api/status", "/api/attempts", "/api/diff/1"):
        status, body = request(served, path, None if host is None else host.format(port=served))
        assert status == 421 and b"toy" not in body


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST:{port}"])
def test_the_dashboard_answers_its_own_address(served: int, host: str) -> None:
    status, body = request(served, "/", host.format(port=served))
    assert status == 200 and b"<title>autoresearch: toy</title>" in body
    status, body = request(served, "/api/status", host.format(port=served))
    assert status == 200 and json.loads(body)["name"] == "toy"


def test_the_dashboard_closes_an_idle_connection(served: int) -> None:
    # A server that kept it open would make recv time out (an error), not return b"".
    with socket.create_connection(("127.0.0.1", served), timeout=30) as idle:
        assert idle.recv(1) == b""


def test_the_live_views_first_frame_names_the_campaign_and_the_cap() -> None:
    from autoresearch.views.live import LiveView

    console = Console(file=io.StringIO(), width=120, record=True, color_system=None)
    view = LiveView(console, "toy", "minimize", 20)
    console.print(view.render())
    first = console.export_text()
    assert "toy" in first and "0/20" in first


def test_an_internal_error_leaves_its_details_in_the_campaign_folder(
    tmp_path: Path, invoke: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    import autoresearch.cli.commands

    repo = fake_campaign(tmp_path)

    def broken(state_dir: Path) -> dict[str, object]:
        raise RuntimeError("a bug")

    monkeypatch.setattr(autoresearch.cli.commands, "campaign_status", broken)
    result = invoke(repo, "status")
    assert result.returncode == 70
    crashes = list((repo / ".autoresearch/toy").glob("autoresearch-crash-*.txt"))
    assert len(crashes) == 1 and "RuntimeError: a bug" in crashes[0].read_text()
    assert str(crashes[0]) in result.stderr.replace("\n", "")
