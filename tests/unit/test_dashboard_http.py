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
    """The page's address as the user is given it: with the token."""
    toy = finished_toy
    server = make_server(toy, toy / ".autoresearch/toy", "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.url()
    server.shutdown()
    server.server_close()


def at(url: str, path: str) -> str:
    """`path` on the server of the page's address `url`, with its token."""
    base, _, query = url.partition("?")
    return base.rstrip("/") + path + ("?" + query if query else "")


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_endpoints_answer_with_the_campaign(served: str) -> None:
    status, page = get(at(served, "/"))
    assert status == 200 and "<svg" in page
    status, text = get(at(served, "/api/status"))
    data = json.loads(text)
    assert data["name"] == "toy" and data["best"] == 0 and data["baseline"] == 7
    attempts = json.loads(get(at(served, "/api/attempts"))[1])
    assert [a["status"] for a in attempts][:3] == ["baseline", "keep", "discard"]
    status, diff = get(at(served, "/api/diff/1"))
    assert status == 200 and "+N = 7" in diff
    assert get(at(served, "/api/diff/99"))[0] == 404
    assert get(at(served, "/nope"))[0] == 404


def test_it_is_read_only(served: str) -> None:
    request = urllib.request.Request(at(served, "/api/status"), data=b"{}", method="POST")
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
            served,
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


PATHS = ("/", "/index.html", "/api/status", "/api/attempts", "/api/diff/1")


def test_without_its_token_the_dashboard_serves_nothing(served: str, finished_toy: Path) -> None:
    token = served.partition("?token=")[2]
    base = served.partition("?")[0].rstrip("/")
    wrong = "x" * len(token)
    for path in PATHS:
        for url, headers in (
            (base + path, {}),
            (f"{base}{path}?token={wrong}", {}),
            (f"{base}{path}?token=", {}),
            (base + path, {"Authorization": f"Bearer {wrong}"}),
            (base + path, {"Cookie": f"autoresearch_token_{base.rsplit(':', 1)[1]}={wrong}"}),
            (base + path, {"Cookie": f"token={token[:-1]}"}),
        ):
            status, body = get(url, headers)
            assert status == 401, (url, headers)
            assert "toy" not in body and "N = 7" not in body and "baseline" not in body
    # nor may it be changed with a guess: a write without the token is refused as unknown
    request = urllib.request.Request(base + "/api/status", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=10)
    assert caught.value.code == 401


def test_the_page_keeps_its_token_in_a_strict_cookie_of_its_port(served: str) -> None:
    base = served.partition("?")[0].rstrip("/")
    port = base.rsplit(":", 1)[1]
    with urllib.request.urlopen(served, timeout=10) as response:
        cookie = response.headers["Set-Cookie"]
    name, _, rest = cookie.partition("=")
    assert name == f"autoresearch_token_{port}"
    value = rest.split(";")[0]
    assert value == served.partition("?token=")[2]
    flags = {f.strip() for f in rest.split(";")[1:]}
    assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= flags
    # the cookie alone, or the token as a bearer, opens every path
    for path in PATHS:
        assert get(base + path, {"Cookie": f"{name}={value}"})[0] == 200
        assert get(base + path, {"Authorization": f"Bearer {value}"})[0] == 200


def test_each_start_has_its_own_token_kept_for_the_user_only(finished_toy: Path) -> None:
    state = finished_toy / ".autoresearch/toy"
    first = make_server(finished_toy, state, "127.0.0.1", 0)
    kept = state / "dashboard.token"
    assert kept.read_text().strip() == first.token and len(first.token) >= 32
    assert kept.stat().st_mode & 0o777 == 0o600
    second = make_server(finished_toy, state, "127.0.0.1", 0)
    threading.Thread(target=second.serve_forever, daemon=True).start()
    try:
        assert second.token != first.token and kept.read_text().strip() == second.token
        base = second.url().partition("?")[0].rstrip("/")
        assert get(f"{base}/api/status?token={first.token}")[0] == 401
        assert get(f"{base}/api/status?token={second.token}")[0] == 200
        # a Host that is not the server's own is refused first, token or not
        assert get(at(second.url(), "/api/status"), {"Host": "evil.example:80"})[0] == 421
    finally:
        second.shutdown()
        second.server_close()
        first.server_close()
    assert not kept.exists()  # a server that stops takes its token with it
