"""`autoresearch dashboard`: a read-only live page of a campaign, served on 127.0.0.1.

The page polls three JSON endpoints and redraws itself: /api/status (the summary),
/api/attempts (the ledger) and /api/diff/<n> (one attempt's diff). Only GET is answered,
and only for a `Host` that names the address the server is bound to: a web page from
elsewhere that rebinds its own DNS name to 127.0.0.1 gets nothing (DNS rebinding). Idle
connections are closed after `IDLE_SECONDS`. Polling never takes the engine's lock.

Every request must also carry the server's token: a secret made at each start, printed to
the user in the page's address (`/?token=...`) and kept in `dashboard.token` of the
campaign's folder, which every sandbox hides (anything else on the machine's loopback, a
candidate's code or the proposer included, cannot read it). The page keeps it in a cookie
of its own port (HttpOnly, SameSite=Strict) and sends it with its fetches; it is compared
in constant time. Without it the answer is 401 and no data. The attempts are served without
their holdout numbers (`attempt.without_holdout`).
"""

from __future__ import annotations

import contextlib
import hmac
import html as markup
import ipaddress
import json
import os
import re
import secrets
from http.cookies import CookieError, SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

from autoresearch.attempt import Status, without_holdout
from autoresearch.errors import AutoresearchError
from autoresearch.store.ledger import Ledger, StateFile, stored_object
from autoresearch.store.results import diff as attempt_diff
from autoresearch.views.render import (
    BEST_LINE_COLOUR,
    OTHER_COLOUR,
    ROW_BACKGROUNDS,
    STATUS_COLOURS,
    figures,
)
from autoresearch.views.status import campaign_status

# How each status is drawn: the colours are the one table the report uses (render.py); the
# page gets them with the statuses' properties, so it follows the enum instead of spelling
# status names.
POINT_FILLS = STATUS_COLOURS
OTHER_FILL = OTHER_COLOUR
POINT_RADII: dict[Status, float] = {Status.KEEP: 5, Status.MERGED: 5}
POINT_RADIUS = 3.5
PROPERTIES = (
    "halts",
    "sets_best",
    "counts_toward_plateau",
    "is_failure",
    "measured",
    "rolls_back_unmeasured",
    "shows_reason",
)

IDLE_SECONDS = 15.0
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
TOKEN_FILE = "dashboard.token"
TOKEN_REFUSED = (
    b"this dashboard answers only with its token: open the address `autoresearch dashboard` "
    b"printed (it ends in ?token=...), or read the token from .autoresearch/<name>/"
    b"dashboard.token\n"
)

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>/*TITLE*/</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
#summary { font-size: 18px; margin-bottom: 0.8em; }
table { border-collapse: collapse; font-size: 14px; margin-top: 1em; }
td, th { border-bottom: 1px solid #ddd; padding: 3px 8px; text-align: left; }
tr.attempt { cursor: pointer; } tr.attempt:hover td { background: #f3f6fb; }
pre#diff { background: #f7f7f7; padding: 1em; max-height: 30em; overflow: auto; }
pre#diff:empty { display: none; }
td.status { white-space: nowrap; }
span.dot { display: inline-block; width: 9px; height: 9px; border-radius: 50%; margin-right: 5px; }
/*STATUS STYLES*/
</style></head><body>
<h1 id="title">autoresearch</h1>
<div id="summary">loading...</div>
<ul id="slots"></ul>
<svg id="chart" width="900" height="360" role="img"
     aria-label="progress chart: every attempt's metric by status, the best so far as a line">
</svg>
<table id="attempts"><thead><tr><th>#</th><th>status</th><th>metric</th><th>gain</th>
<th>delta</th><th>samples</th><th>spread (sd)</th><th>description</th><th>reason</th></tr>
</thead><tbody></tbody></table>
<h2 id="diff-title"></h2><pre id="diff"></pre>
<script>
const NS = "http://www.w3.org/2000/svg";
const STATUSES = /*STATUSES*/;
const OTHER = {sets_best: false, point: "other", radius: /*POINT RADIUS*/};
const BEST_COLOUR = /*BEST COLOUR*/;
function look(status) { return STATUSES[status] || OTHER; }
function fmt(v) {
  if (v === null || v === undefined) return "-";
  const s = Number(v).toPrecision(6);
  return s.includes(".") && !s.includes("e") ? s.replace(/0+$/, "").replace(/\\.$/, "") : s;
}
function signed(v) {
  if (v === null || v === undefined) return "-";
  return (v > 0 ? "+" : "") + fmt(v);
}
function el(tag, attrs, text) {
  const e = document.createElementNS(NS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text) e.textContent = text;
  return e;
}
function drawChart(records, status) {
  const svg = document.getElementById("chart");
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const pts = records.filter(r => r.metric !== null && r.metric !== undefined);
  if (!pts.length) return;
  const W = 900, H = 360, L = 70, R = 20, T = 20, B = 90;
  const xs = records.map(r => r.iteration), ys = pts.map(r => r.metric);
  const x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 1);
  let y0 = Math.min(...ys), y1 = Math.max(...ys); if (y0 === y1) { y0 -= 1; y1 += 1; }
  const sx = x => L + (x - x0) / (x1 - x0) * (W - L - R);
  const sy = y => H - B - (y - y0) / (y1 - y0) * (H - T - B);
  svg.appendChild(el("line", {x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#999"}));
  svg.appendChild(el("line", {x1: L, y1: T, x2: L, y2: H - B, stroke: "#999"}));
  for (const y of [y0, (y0 + y1) / 2, y1]) {
    svg.appendChild(el("text", {x: L - 6, y: sy(y) + 4, "font-size": 12, "text-anchor": "end",
                                class: "tick"}, fmt(y)));
  }
  for (const x of [x0, Math.round((x0 + x1) / 2), x1]) {
    svg.appendChild(el("text", {x: sx(x), y: H - B + 16, "font-size": 12,
                                "text-anchor": "middle", class: "tick"}, String(x)));
  }
  svg.appendChild(el("text", {x: (L + W - R) / 2, y: H - B + 34, "font-size": 13,
                              "text-anchor": "middle", class: "axis-label x"}, "attempt"));
  const better = status.direction === "maximize" ? "higher" : "lower";
  const label = "metric (" + better + " is better)";
  svg.appendChild(el("text", {x: 14, y: (T + H - B) / 2, "font-size": 13,
                              "text-anchor": "middle", class: "axis-label y",
                              transform: "rotate(-90 14 " + (T + H - B) / 2 + ")"}, label));
  let best = null, path = "";
  for (const r of records) {
    if (best !== null) path += " L " + sx(r.iteration) + " " + sy(best);
    if (look(r.status).sets_best && r.metric !== null) best = r.best ?? r.metric;
    if (best !== null) path += (path ? " L " : "M ") + sx(r.iteration) + " " + sy(best);
  }
  svg.appendChild(el("path", {d: path, fill: "none", stroke: BEST_COLOUR, "stroke-width": 2,
                              class: "best-line"}));
  for (const r of pts) {
    const c = el("circle", {cx: sx(r.iteration), cy: sy(r.metric), r: look(r.status).radius,
                            class: "point " + look(r.status).point});
    c.appendChild(el("title", {}, "#" + r.iteration + " " + r.status + " " + fmt(r.metric)));
    svg.appendChild(c);
  }
  // The legend: the statuses drawn here, in the order of the enum, and the best line.
  const shown = Object.keys(STATUSES).filter(s => pts.some(r => r.status === s));
  if (pts.some(r => !(r.status in STATUSES))) shown.push("other");
  const g = el("g", {class: "legend"});
  let lx = L;
  const ly = H - 28;
  g.appendChild(el("line", {x1: lx, y1: ly - 4, x2: lx + 18, y2: ly - 4, stroke: BEST_COLOUR,
                            "stroke-width": 2}));
  g.appendChild(el("text", {x: lx + 22, y: ly, "font-size": 12, class: "legend-item"},
                   "best so far"));
  lx += 110;
  for (const s of shown) {
    const point = s === "other" ? "other" : look(s).point;
    g.appendChild(el("circle", {cx: lx + 5, cy: ly - 4, r: 5, class: "swatch " + point}));
    g.appendChild(el("text", {x: lx + 14, y: ly, "font-size": 12, class: "legend-item"}, s));
    lx += 24 + 7.5 * s.length;
  }
  svg.appendChild(g);
}
// The token came in the address; it is kept here (and in the server's cookie) and taken
// out of the address bar, so that a copied link or a screenshot does not carry it.
const TOKEN = new URLSearchParams(location.search).get("token");
if (TOKEN) history.replaceState(null, "", location.pathname);
function api(path) {
  return fetch(path + (TOKEN ? "?token=" + encodeURIComponent(TOKEN) : ""),
               {credentials: "same-origin"});
}
async function showDiff(n) {
  const res = await api("api/diff/" + n);
  document.getElementById("diff-title").textContent = "Attempt " + n;
  document.getElementById("diff").textContent = await res.text();
}
async function refresh() {
  try {
    const [status, records, figs] = await Promise.all([
      api("api/status").then(r => r.json()), api("api/attempts").then(r => r.json()),
      api("api/figures").then(r => r.json())]);
    const fig = {};
    for (const f of figs) fig[f.iteration] = f;
    document.getElementById("title").textContent = "autoresearch: " + status.name;
    document.title = "autoresearch: " + status.name;
    const state = status.running ? "running (" + status.phase + ")"
                                 : "stopped: " + (status.stop_reason || "-");
    document.getElementById("summary").textContent =
      "baseline " + fmt(status.baseline) + " | best " + fmt(status.best) + " at attempt " +
      status.best_iteration + " | attempts " + status.iterations + " | " + state;
    const slots = document.getElementById("slots");
    slots.innerHTML = "";
    for (const s of (status.slots || [])) {
      const li = document.createElement("li");
      li.className = "slot";
      li.textContent = "slot " + s.slot + ": " + (s.iteration === null ? "idle" :
        "attempt " + s.iteration + ", " + s.phase +
        (s.elapsed_seconds === null ? "" : ", " + Math.round(s.elapsed_seconds) + " s"));
      slots.appendChild(li);
    }
    drawChart(records, status);
    const body = document.querySelector("#attempts tbody");
    body.innerHTML = "";
    for (const r of records) {
      const tr = document.createElement("tr");
      tr.className = "attempt " + r.status;
      const extra = Object.entries(r.metrics || {})
        .filter(([, m]) => m && m.value !== undefined)
        .map(([n, m]) => n + "=" + fmt(m.value)).join(" ");
      const text = (r.description || "") + (extra ? " {" + extra + "}" : "");
      const f = fig[r.iteration] || {};
      const cells = [r.iteration, r.status, fmt(r.metric), signed(f.gain), signed(r.delta),
                     f.samples ?? "-", fmt(f.spread), text, r.reason || ""];
      for (const v of cells) {
        const td = document.createElement("td"); td.textContent = v; tr.appendChild(td);
      }
      tr.children[1].className = "status";
      const dot = document.createElement("span");
      dot.className = "dot " + look(r.status).point;
      tr.children[1].prepend(dot);
      tr.children[8].className = "reason";
      tr.onclick = () => showDiff(r.iteration);
      body.appendChild(tr);
    }
  } catch (e) {
    document.getElementById("summary").textContent = "cannot read the campaign: " + e;
  }
}
refresh();
setInterval(refresh, 2000);
</script></body></html>
"""


def _status_styles() -> str:
    rows = [
        f"tr.{status} td {{ background: {colour}; }}" for status, colour in ROW_BACKGROUNDS.items()
    ]
    fills: dict[str, list[str]] = {}
    for status, colour in POINT_FILLS.items():
        fills.setdefault(colour, []).append(f".{status}")
    points = [f"{', '.join(names)} {{ fill: {colour}; }}" for colour, names in fills.items()]
    # the table's status cells carry a dot of the same colour
    dots = [
        f"span.dot.{status} {{ background: {colour}; }}" for status, colour in POINT_FILLS.items()
    ]
    other = f".other {{ fill: {OTHER_FILL}; }} span.dot.other {{ background: {OTHER_FILL}; }}"
    return "\n".join([*rows, *points, other, *dots])


def _statuses() -> dict[str, dict[str, object]]:
    """Each status's properties and how it is drawn, for the page's script."""
    return {
        str(status): {
            **{name: getattr(status, name) for name in PROPERTIES},
            "point": str(status) if status in POINT_FILLS else "other",
            "radius": POINT_RADII.get(status, POINT_RADIUS),
        }
        for status in Status
    }


def page(name: str = "") -> str:
    """The page, titled with the campaign's name, with the statuses' styles and properties
    written in from the enum."""
    title = f"autoresearch: {name}" if name else "autoresearch dashboard"
    return (
        PAGE.replace("/*TITLE*/", markup.escape(title))
        .replace("/*STATUS STYLES*/", _status_styles())
        .replace("/*STATUSES*/", json.dumps(_statuses()))
        .replace("/*POINT RADIUS*/", json.dumps(POINT_RADIUS))
        .replace("/*BEST COLOUR*/", json.dumps(BEST_LINE_COLOUR))
    )


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def allowed_hosts(host: str, port: int) -> set[str] | None:
    """The `Host` header values the server answers: the address it is bound to, and
    `localhost` for a loopback address. None for a wildcard address (0.0.0.0, ::), where
    any IP literal is accepted but still no name, which a rebinding attack would need."""
    if host in ("", "0.0.0.0", "::"):
        return None
    literal = f"[{host}]" if ":" in host and not host.startswith("[") else host
    names = {literal.lower()}
    try:
        if ipaddress.ip_address(host.strip("[]")).is_loopback:
            names.update(LOOPBACK_NAMES)
    except ValueError:
        pass
    hosts = {f"{name}:{port}" for name in names}
    if port == 80:
        hosts |= names
    return hosts


HOST_HEADER = re.compile(r"(\[[0-9a-f:.]+\]|[^:\[\]]+)(?::([0-9]{1,5}))?")


def host_allowed(header: str | None, allowed: set[str] | None, port: int) -> bool:
    if not header:
        return False
    header = header.strip().lower()
    if allowed is not None:
        return header in allowed
    match = HOST_HEADER.fullmatch(header)
    if match is None or int(match.group(2) or 80) != port:
        return False
    return _is_ip(match.group(1))


def token_matches(given: str | None, token: str) -> bool:
    """Whether a request's token is the server's, in time that does not depend on how much
    of it was right."""
    if not given:
        return False
    return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode())


def write_token(state_dir: Path, token: str) -> Path:
    """The token in the campaign's folder, readable by the user only; a link planted at its
    path is replaced, never written through."""
    path = state_dir / TOKEN_FILE
    state_dir.mkdir(parents=True, exist_ok=True)
    fresh = state_dir / f".{TOKEN_FILE}.{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(fresh)
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    os.replace(fresh, path)
    return path


class DashboardServer(ThreadingHTTPServer):
    """The dashboard's HTTP server, with its token and the file that keeps it."""

    token: str = ""
    token_file: Path | None = None

    def url(self) -> str:
        """The page's address with the token, as the user is given it."""
        host, port = str(self.server_address[0]), int(self.server_address[1])
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/?token={quote(self.token)}"

    def server_close(self) -> None:
        super().server_close()
        path = self.token_file
        if path is not None:
            # Only while it is still this server's: a dashboard started since keeps its own.
            with contextlib.suppress(OSError):
                if path.read_text().strip() == self.token:
                    path.unlink()
            self.token_file = None


def make_server(
    root: Path,
    state_dir: Path,
    host: str,
    port: int,
    name: str | None = None,
    token: str | None = None,
) -> DashboardServer:
    """The dashboard of the campaign in `state_dir`, listening on host:port; its token is
    `token` or a fresh secret, written to `dashboard.token` in `state_dir`."""
    title = name or state_dir.name
    secret = token or secrets.token_urlsafe(32)

    class Handler(BaseHTTPRequestHandler):
        timeout = IDLE_SECONDS  # a connection that says nothing is closed

        def log_message(self, *args: object) -> None:
            return

        def _host_ok(self) -> bool:
            bound = int(self.server.server_address[1])  # type: ignore[index]
            if host_allowed(self.headers.get("Host"), allowed_hosts(host, bound), bound):
                return True
            self._send(421, b"unknown host\n", "text/plain; charset=utf-8")
            return False

        def _cookie_name(self) -> str:
            # Cookies do not tell ports apart: each dashboard's is named for its own.
            return f"autoresearch_token_{int(self.server.server_address[1])}"  # type: ignore[index]

        def _given(self) -> tuple[str | None, bool]:
            """The request's token, and whether it came in the address (then the page's
            answer sets the cookie)."""
            query = parse_qs(self.path.partition("?")[2]).get("token")
            if query:
                return query[0], True
            header = self.headers.get("Authorization") or ""
            if header.startswith("Bearer "):
                return header.removeprefix("Bearer ").strip(), False
            try:
                cookie = SimpleCookie(self.headers.get("Cookie") or "")
            except CookieError:
                return None, False
            morsel = cookie.get(self._cookie_name())
            return (morsel.value if morsel is not None else None), False

        def _token_ok(self) -> bool:
            given, _ = self._given()
            if token_matches(given, secret):
                return True
            self._send(401, TOKEN_REFUSED, "text/plain; charset=utf-8")
            return False

        def _send(self, status: int, body: bytes, kind: str, cookie: str | None = None) -> None:
            self.send_response(status)
            if cookie is not None:
                self.send_header("Set-Cookie", cookie)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def _json(self, data: Any, status: int = 200) -> None:
            self._send(status, json.dumps(data).encode(), "application/json")

        html = page(title).encode()

        def do_GET(self) -> None:
            if not self._host_ok() or not self._token_ok():
                return
            path = self.path.split("?", 1)[0]
            try:
                if path in ("/", "/index.html"):
                    _, in_address = self._given()
                    cookie = (
                        f"{self._cookie_name()}={secret}; Path=/; HttpOnly; SameSite=Strict"
                        if in_address
                        else None
                    )
                    self._send(200, self.html, "text/html; charset=utf-8", cookie)
                elif path == "/api/status":
                    self._json(campaign_status(state_dir))
                elif path == "/api/figures":
                    direction = str(StateFile(state_dir).read().get("direction") or "minimize")
                    self._json([figures(r, direction) for r in Ledger(state_dir).read()])
                elif path == "/api/attempts":
                    shown = [stored_object(without_holdout(r)) for r in Ledger(state_dir).read()]
                    self._json(shown)
                elif match := re.fullmatch(r"/api/diff/(\d+)", path):
                    records = {r.iteration: r for r in Ledger(state_dir).read()}
                    record = records.get(int(match.group(1)))
                    if record is None:
                        self._send(404, b"no such attempt\n", "text/plain; charset=utf-8")
                    else:
                        # Ledger fields reach git only as checked object names.
                        text = attempt_diff(root, record) or "(no change)\n"
                        self._send(200, text.encode(), "text/plain; charset=utf-8")
                else:
                    self._send(404, b"not found\n", "text/plain; charset=utf-8")
            except AutoresearchError as exc:
                self._json({"error": str(exc)}, status=503)

        def _refuse(self) -> None:
            if self._host_ok() and self._token_ok():
                self._send(405, b"read-only\n", "text/plain; charset=utf-8")

        do_POST = do_PUT = do_DELETE = do_PATCH = _refuse

    server = DashboardServer((host, port), Handler)
    server.token = secret
    try:
        server.token_file = write_token(state_dir, secret)
    except OSError:
        server.server_close()
        raise
    return server
