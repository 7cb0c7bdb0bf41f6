"""The dashboard served on 127.0.0.1 from a finished campaign: its JSON endpoints,
read-only serving, and the page drawn in Chromium (the command: tests/e2e/)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoresearch.views.dashboard import make_server


@pytest.fixture
def served(finished_toy: Path) -> Iterator[str]:
    toy = finished_toy
    server = make_server(toy, toy / ".autoresearch/toy", "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_endpoints_answer_with_the_campaign(served: str) -> None:
    status, page = get(served + "/")
    assert status == 200 and "<svg" in page
    status, text = get(served + "/api/status")
    data = json.loads(text)
    assert data["name"] == "toy" and data["best"] == 0 and data["baseline"] == 7
    attempts = json.loads(get(served + "/api/attempts")[1])
    assert [a["status"] for a in attempts][:3] == ["baseline", "keep", "discard"]
    status, diff = get(served + "/api/diff/1")
    assert status == 200 and "+N = 7" in diff
    assert get(served + "/api/diff/99")[0] == 404
    assert get(served + "/nope")[0] == 404


def test_it_is_read_only(served: str) -> None:
    request = urllib.request.Request(served + "/api/status", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=10)
    assert caught.value.code == 405


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def test_chromium_draws_the_chart_and_the_table(served: str, tmp_path: Path) -> None:
    browser = chromium()
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("CI must install Debian's chromium package (see .ci/run)")
        pytest.skip("chromium is not installed")
    started = time.monotonic()
    proc = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=10000",
            "--dump-dom",
            served + "/",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    dom = proc.stdout
    elapsed = time.monotonic() - started
    assert "autoresearch: toy" in dom, (proc.returncode, proc.stderr[-2000:], elapsed)
    assert dom.count('class="point ') == 5  # the attempts that have a metric
    assert 'class="point keep"' in dom and 'class="best-line"' in dom
    assert dom.count('class="attempt ') == 8
    assert "best 0 at attempt 7" in dom
