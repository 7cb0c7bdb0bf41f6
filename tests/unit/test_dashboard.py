"""The dashboard over a ledger written by 0.1.0: the JSON it serves is the ledger's own, and
the page takes the statuses from the enum."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoresearch.attempt import Status
from autoresearch.views.dashboard import PROPERTIES, make_server, page

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "ledger_v1"


@pytest.fixture
def campaign(tmp_path: Path) -> Path:
    """The toy repository of the fixture ledger, with its campaign folder."""
    repo = tmp_path / "repo"
    subprocess.run(
        ["git", "clone", "-q", str(FIXTURES / "toy.bundle"), str(repo)],
        check=True,
        capture_output=True,
    )
    state_dir = repo / ".autoresearch" / "toy"
    state_dir.mkdir(parents=True)
    shutil.copy(FIXTURES / "ledger.jsonl", state_dir / "ledger.jsonl")
    shutil.copy(FIXTURES / "state.json", state_dir / "state.json")
    return repo


@pytest.fixture
def served(campaign: Path) -> Iterator[str]:
    server = make_server(campaign, campaign / ".autoresearch/toy", "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.url()
    server.shutdown()
    server.server_close()


def at(url: str, path: str) -> str:
    """`path` on the server of the page's address `url`, with its token."""
    base, _, query = url.partition("?")
    return base.rstrip("/") + path + ("?" + query if query else "")


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_attempts_are_served_as_the_ledger_holds_them_but_the_holdout(
    served: str, campaign: Path
) -> None:
    lines = (campaign / ".autoresearch/toy/ledger.jsonl").read_text().splitlines()
    status, text = get(at(served, "/api/attempts"))
    assert status == 200
    assert text == json.dumps([json.loads(line) for line in lines])


def test_status_and_diffs(served: str) -> None:
    data = json.loads(get(at(served, "/api/status"))[1])
    assert (data["name"], data["baseline"], data["best"], data["best_iteration"]) == (
        "toy",
        7.0,
        1.0,
        8,
    )
    status, diff = get(at(served, "/api/diff/1"))
    assert status == 200 and "+N = 7" in diff
    assert get(at(served, "/api/diff/6")) == (200, "(no change)\n")
    assert get(at(served, "/api/diff/99"))[0] == 404


def test_the_page_carries_every_status_and_its_properties() -> None:
    html = page()
    found = re.search(r"const STATUSES = (\{.*?\});\n", html)
    assert found is not None
    statuses = json.loads(found.group(1))
    assert list(statuses) == [str(s) for s in Status]
    for status in Status:
        shown = statuses[str(status)]
        assert {name: shown[name] for name in PROPERTIES} == {
            name: getattr(status, name) for name in PROPERTIES
        }
    assert statuses["keep"]["radius"] > statuses["discard"]["radius"]
    assert statuses["guard_failed"]["point"] == "guard_failed"
    assert statuses["no_change"]["point"] == "other"  # no colour of its own
    assert "/*" not in html.split("<script>")[0]  # every placeholder was filled
    assert ".keep, .merged { fill: #2ca02c; }" in html and ".crash { fill: #d62728; }" in html


def test_chromium_draws_the_old_ledger(served: str, tmp_path: Path) -> None:
    browser = next(
        (
            found
            for n in ("chromium", "chromium-browser", "google-chrome")
            if (found := shutil.which(n))
        ),
        None,
    )
    if browser is None:
        pytest.skip("chromium is not installed")
    proc = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=10000",
            "--dump-dom",
            served,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    dom = proc.stdout
    assert "autoresearch: toy" in dom, proc.stderr[-2000:]
    points = re.findall(r'<circle [^>]*r="([0-9.]+)" class="point (\w+)"', dom)
    assert sorted(points) == sorted(
        [
            ("3.5", "baseline"),
            ("5", "keep"),
            ("3.5", "discard"),
            ("3.5", "guard_failed"),
            ("5", "keep"),
        ]
    )
    assert 'class="best-line"' in dom and dom.count('class="attempt ') == 9
    assert "best 1 at attempt 8" in dom
