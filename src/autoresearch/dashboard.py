"""`autoresearch dashboard`: a read-only live page of a campaign, served on 127.0.0.1.

The page polls three JSON endpoints and redraws itself: /api/status (the summary),
/api/attempts (the ledger) and /api/diff/<n> (one attempt's diff). Only GET is answered.
"""

from __future__ import annotations

import json
import re
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from autoresearch.errors import AutoresearchError
from autoresearch.ledger import Ledger
from autoresearch.results import diff as attempt_diff
from autoresearch.status import campaign_status

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>autoresearch dashboard</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
#summary { font-size: 18px; margin-bottom: 0.8em; }
table { border-collapse: collapse; font-size: 14px; margin-top: 1em; }
td, th { border-bottom: 1px solid #ddd; padding: 3px 8px; text-align: left; }
tr.attempt { cursor: pointer; } tr.attempt:hover td { background: #f3f6fb; }
tr.keep td { background: #e8f5e9; }
pre#diff { background: #f7f7f7; padding: 1em; max-height: 30em; overflow: auto; }
pre#diff:empty { display: none; }
.keep { fill: #2ca02c; } .baseline { fill: #1f77b4; } .discard { fill: #b0b0b0; }
.crash, .timeout, .tampered { fill: #d62728; } .other { fill: #9467bd; }
</style></head><body>
<h1 id="title">autoresearch</h1>
<div id="summary">loading...</div>
<svg id="chart" width="900" height="320" role="img" aria-label="progress chart"></svg>
<table id="attempts"><thead><tr><th>#</th><th>status</th><th>metric</th><th>delta</th>
<th>description</th></tr></thead><tbody></tbody></table>
<h2 id="diff-title"></h2><pre id="diff"></pre>
<script>
const NS = "http://www.w3.org/2000/svg";
function fmt(v) {
  if (v === null || v === undefined) return "-";
  const s = Number(v).toPrecision(6);
  return s.includes(".") && !s.includes("e") ? s.replace(/0+$/, "").replace(/\\.$/, "") : s;
}
function el(tag, attrs, text) {
  const e = document.createElementNS(NS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text) e.textContent = text;
  return e;
}
function drawChart(records) {
  const svg = document.getElementById("chart");
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const pts = records.filter(r => r.metric !== null && r.metric !== undefined);
  if (!pts.length) return;
  const W = 900, H = 320, P = 40;
  const xs = records.map(r => r.iteration), ys = pts.map(r => r.metric);
  const x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 1);
  let y0 = Math.min(...ys), y1 = Math.max(...ys); if (y0 === y1) { y0 -= 1; y1 += 1; }
  const sx = x => P + (x - x0) / (x1 - x0) * (W - 2 * P);
  const sy = y => H - P - (y - y0) / (y1 - y0) * (H - 2 * P);
  svg.appendChild(el("line", {x1: P, y1: H - P, x2: W - P, y2: H - P, stroke: "#999"}));
  svg.appendChild(el("line", {x1: P, y1: P, x2: P, y2: H - P, stroke: "#999"}));
  svg.appendChild(el("text", {x: 4, y: P - 10, "font-size": 12}, fmt(y1)));
  svg.appendChild(el("text", {x: 4, y: H - P, "font-size": 12}, fmt(y0)));
  let best = null, path = "";
  for (const r of records) {
    if (best !== null) path += " L " + sx(r.iteration) + " " + sy(best);
    if ((r.status === "keep" || r.status === "baseline") && r.metric !== null) best = r.metric;
    if (best !== null) path += (path ? " L " : "M ") + sx(r.iteration) + " " + sy(best);
  }
  svg.appendChild(el("path", {d: path, fill: "none", stroke: "#2ca02c", "stroke-width": 2,
                              class: "best-line"}));
  for (const r of pts) {
    const known = ["keep", "baseline", "discard", "crash", "timeout", "tampered"];
    const c = el("circle", {cx: sx(r.iteration), cy: sy(r.metric), r: r.status === "keep" ? 5 : 3.5,
                            class: "point " + (known.includes(r.status) ? r.status : "other")});
    c.appendChild(el("title", {}, "#" + r.iteration + " " + r.status + " " + fmt(r.metric)));
    svg.appendChild(c);
  }
}
async function showDiff(n) {
  const res = await fetch("api/diff/" + n);
  document.getElementById("diff-title").textContent = "Attempt " + n;
  document.getElementById("diff").textContent = await res.text();
}
async function refresh() {
  try {
    const [status, records] = await Promise.all([
      fetch("api/status").then(r => r.json()), fetch("api/attempts").then(r => r.json())]);
    document.getElementById("title").textContent = "autoresearch: " + status.name;
    const state = status.running ? "running (" + status.phase + ")"
                                 : "stopped: " + (status.stop_reason || "-");
    document.getElementById("summary").textContent =
      "baseline " + fmt(status.baseline) + " | best " + fmt(status.best) + " at attempt " +
      status.best_iteration + " | attempts " + status.iterations + " | " + state;
    drawChart(records);
    const body = document.querySelector("#attempts tbody");
    body.innerHTML = "";
    for (const r of records) {
      const tr = document.createElement("tr");
      tr.className = "attempt " + r.status;
      for (const v of [r.iteration, r.status, fmt(r.metric), fmt(r.delta), r.description || ""]) {
        const td = document.createElement("td"); td.textContent = v; tr.appendChild(td);
      }
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


def make_server(root: Path, state_dir: Path, host: str, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return

        def _send(self, status: int, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def _json(self, data: Any, status: int = 200) -> None:
            self._send(status, json.dumps(data).encode(), "application/json")

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            try:
                if path in ("/", "/index.html"):
                    self._send(200, PAGE.encode(), "text/html; charset=utf-8")
                elif path == "/api/status":
                    self._json(campaign_status(state_dir))
                elif path == "/api/attempts":
                    self._json(Ledger(state_dir).records())
                elif match := re.fullmatch(r"/api/diff/(\d+)", path):
                    records = {int(r["iteration"]): r for r in Ledger(state_dir).records()}
                    record = records.get(int(match.group(1)))
                    if record is None:
                        self._send(404, b"no such attempt\n", "text/plain; charset=utf-8")
                    else:
                        text = attempt_diff(root, record) or "(no change)\n"
                        self._send(200, text.encode(), "text/plain; charset=utf-8")
                else:
                    self._send(404, b"not found\n", "text/plain; charset=utf-8")
            except AutoresearchError as exc:
                self._json({"error": str(exc)}, status=503)

        def _refuse(self) -> None:
            self._send(405, b"read-only\n", "text/plain; charset=utf-8")

        do_POST = do_PUT = do_DELETE = do_PATCH = _refuse

    return ThreadingHTTPServer((host, port), Handler)
