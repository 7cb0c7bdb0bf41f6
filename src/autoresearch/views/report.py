"""`autoresearch report`: report.md, progress.png and a single-file report.html per campaign."""

from __future__ import annotations

import base64
import html
import json
import math
import platform
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.checks.holdout import holdout_gain
from autoresearch.errors import ConfigError
from autoresearch.measure.confirm import describe as describe_confirmation
from autoresearch.measure.confirm import load as load_confirmation
from autoresearch.measure.metrics import shown
from autoresearch.store.ledger import Ledger, StateFile
from autoresearch.store.summary import summarize
from autoresearch.views.render import (
    BEST_LINE_COLOUR,
    OTHER_COLOUR,
    ROW_BACKGROUNDS,
    STATUS_COLOURS,
    colour,
    figures,
    gain,
    gain_text,
    printable,
    signed,
)

# The one colour table (render.py), under the names this module has always had.
COLORS = STATUS_COLOURS
OTHER_COLOR = OTHER_COLOUR


@dataclass
class Paths:
    markdown: Path
    image: Path | None
    html: Path


def _num(value: object) -> str:
    return "-" if value is None else f"{value:.6g}" if isinstance(value, float) else str(value)


# Inline markup only: a description never starts a line of report.md.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&$])")


def md_text(text: str) -> str:
    """`text` as literal Markdown on one line: every character Markdown or HTML would read
    as markup is escaped, control characters are shown as escapes."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", printable(text))


def _finite(value: Any) -> Any:
    """JSON-safe: NaN and infinities (which JSON does not have) become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def script_json(data: Any) -> str:
    """JSON to embed in a <script> element: it parses as it stands (no HTML entities), and
    no value can close the element."""
    text = json.dumps(_finite(data), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def draw_progress(records: list[AttemptRecord], direction: str, path: Path) -> bool:
    """Every attempt as a point coloured by status, the running best as a line."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(10, 5), dpi=120)
    by_status: dict[Status, list[tuple[int, float]]] = defaultdict(list)
    best_x: list[int] = []
    best_y: list[float] = []
    best: float | None = None
    for record in records:
        metric = record.metric
        if metric is not None:
            by_status[record.status].append((record.iteration, metric))
        if record.status.sets_best and record.best_after is not None:
            best = record.best_after
        if best is not None:
            best_x.append(record.iteration)
            best_y.append(best)
    for status, points in by_status.items():
        ax.scatter(
            [p[0] for p in points],
            [p[1] for p in points],
            s=36 if status is Status.KEEP else 18,
            color=colour(status),
            label=str(status),
            zorder=3,
            alpha=0.9 if status.sets_best else 0.6,
        )
    if best_x:
        ax.step(
            best_x,
            best_y,
            where="post",
            color=BEST_LINE_COLOUR,
            linewidth=1.8,
            label="best so far",
            zorder=2,
        )
    for record in records:
        if record.status is Status.KEEP and record.metric is not None:
            ax.annotate(
                printable(record.description[:28]),
                (record.iteration, record.metric),
                textcoords="offset points",
                xytext=(4, 6),
                fontsize=7,
                color="#1b5e20",
                parse_math=False,  # a description is text: "$\\foo$" is not mathtext
            )
    ax.set_xlabel("attempt")
    ax.set_ylabel(f"metric ({'lower' if direction == 'minimize' else 'higher'} is better)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def gather(state_dir: Path) -> dict[str, Any]:
    records = Ledger(state_dir).read()
    if not records:
        raise ConfigError(f"campaign '{state_dir.name}' has no attempts yet; run it first.")
    state = StateFile(state_dir).read()
    direction = str(state.get("direction") or "minimize")
    summary = summarize(state_dir.name, direction, records).to_json()
    summary["stop_reason"] = state.get("stop_reason")
    summary["seconds"] = round(sum(_seconds(r) for r in records), 1)
    summary["confirmed"] = load_confirmation(state_dir)
    kept = [r for r in records if r.status in (Status.KEEP, Status.MERGED)]
    kept.sort(key=lambda r: -abs(r.delta or 0.0))
    failures: dict[Status, list[AttemptRecord]] = defaultdict(list)
    for record in records:
        if record.status.is_failure:
            failures[record.status].append(record)
    refused = [r for r in records if r.status.rule_kept or r.status is Status.REJECTED]
    fingerprint = state.get("fingerprint") or {}
    return {
        "summary": summary,
        "records": records,
        "kept": kept,
        "failures": dict(failures),
        "refused": refused,  # better by the rule, refused by a later check (review.py)
        "holdout": state.get("holdout"),  # the final best on the holdout (holdout.py)
        "environment": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "harness_commit": records[0].commit,
            "fingerprint": fingerprint.get("settings"),
            "harness_files": fingerprint.get("files", {}),
            # the isolation the metric and guard ran in (a campaign of 0.1.0 had none)
            "isolation": state.get("isolation") or "none",
        },
    }


def _seconds(record: AttemptRecord) -> float:
    """An attempt's wall time; the baseline has no total, its measurement stands for it."""
    timings = record.timings
    if timings is None:
        return 0.0
    return (timings.total or 0.0) + timings.measure * (record.iteration == 0)


def render_markdown(data: dict[str, Any], image: str | None) -> str:
    s = data["summary"]
    direction = str(s["direction"])
    lines = [
        f"# Campaign {md_text(str(s['name']))}",
        "",
        f"- baseline: {_num(s['baseline'])}",
        f"- best: {_num(s['best'])} (attempt {s['best_iteration']}, "
        f"commit {str(s.get('best_commit') or '')[:10]})",
        f"- change: {gain_text(s.get('delta'), direction, s.get('improvement_pct'))} "
        f"({'lower' if direction == 'minimize' else 'higher'} is better)",
        f"- confidence that the best beats the baseline: {_num(s.get('confidence'))}",
        f"- noise (pooled sigma): {_num(s.get('noise'))}",
        "- confirmed gain: "
        + (md_text(describe_confirmation(s["confirmed"])) if s.get("confirmed") else "not measured")
        + (" (`autoresearch confirm`)" if not s.get("confirmed") else ""),
        f"- attempts: {s['iterations']}; "
        + ", ".join(f"{k} {v}" for k, v in sorted(s["counts"].items())),
        f"- stop reason: {s.get('stop_reason') or 'not stopped'}",
        f"- time: {s['seconds']:.0f} s; cost: ${s.get('cost_usd', 0):.4f}; tokens: "
        f"{s.get('tokens_in', 0)} in, {s.get('tokens_out', 0)} out",
        "",
    ]
    if image:
        lines += [f"![progress]({image})", ""]
    lines += [
        "## Kept changes, by gain",
        "",
        "| # | metric | gain | delta | holdout gain | metrics | description |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in data["kept"]:
        lines.append(
            f"| {r.iteration} | {_num(r.metric)} | {signed(gain(r.delta, direction))} | "
            f"{signed(r.delta)} | {holdout_gain(r)} | {md_text(shown(r.metrics))} | "
            f"{md_text(r.description)} |"
        )
    if not data["kept"]:
        lines.append("| - | - | - | - | - | - | nothing was kept |")
    final = data.get("holdout")
    if isinstance(final, dict):
        best = s.get("best")
        base = s.get("baseline")
        primary = None if best is None or base is None else gain(best - base, direction)
        lines += [
            "",
            f"Primary gain {signed(primary)}; holdout gain {signed(final.get('gain'))} "
            f"({_num(final.get('baseline'))} -> {_num(final.get('best'))}), the final best "
            "against the baseline on data the proposer never saw.",
        ]
    if data.get("refused"):
        lines += ["", "## Better, but refused", ""]
        for r in data["refused"]:
            reason = md_text((r.reason or "")[:200])
            lines.append(f"- #{r.iteration} {r.status} {md_text(r.description)}: {reason}")
    lines += ["", "## Failures, by kind", ""]
    if not data["failures"]:
        lines.append("none")
    for kind, records in sorted(data["failures"].items()):
        lines.append(f"### {kind} ({len(records)})")
        lines.append("")
        for r in records:
            reason = md_text((r.reason or "")[:160])
            lines.append(f"- #{r.iteration} {md_text(r.description)}: {reason}")
        lines.append("")
    env = data["environment"]
    lines += [
        "## Environment",
        "",
        f"- interpreter: Python {env['python']}",
        f"- platform: {env['platform']}",
        f"- harness at commit: {env['harness_commit']}",
        f"- judge fingerprint: {env['fingerprint']}",
        f"- isolation of the proposer's commands, metric and guard: {md_text(env['isolation'])}",
    ]
    for name, digest in sorted(env["harness_files"].items()):
        lines.append(f"- {md_text(name)}: sha256 {digest}")
    return "\n".join(lines) + "\n"


def _legend() -> str:
    """The status colours as a key: the same table the chart and the dashboard use."""
    items = [
        f"<span class='swatch' style='background:{c}'></span>{html.escape(str(st))}"
        for st, c in STATUS_COLOURS.items()
    ]
    items.append(f"<span class='swatch' style='background:{OTHER_COLOUR}'></span>other")
    return "<p class='legend'>" + " ".join(f"<span>{i}</span>" for i in items) + "</p>"


def _html_kept(data: dict[str, Any], direction: str) -> str:
    esc = html.escape
    rows = "".join(
        f"<tr class='{esc(r.status)}'><td>{r.iteration}</td><td>{esc(_num(r.metric))}</td>"
        f"<td>{esc(signed(gain(r.delta, direction)))}</td><td>{esc(signed(r.delta))}</td>"
        f"<td>{esc(holdout_gain(r))}</td><td>{esc(shown(r.metrics))}</td>"
        f"<td>{esc(printable(r.description))}</td></tr>"
        for r in data["kept"]
    )
    if not rows:
        rows = "<tr><td colspan='7'>nothing was kept</td></tr>"
    return (
        "<h2 id='kept'>Kept changes, by gain</h2><table><tr><th>#</th><th>metric</th>"
        "<th>gain</th><th>delta</th><th>holdout gain</th><th>metrics</th>"
        f"<th>description</th></tr>{rows}</table>"
    )


def _html_failures(data: dict[str, Any]) -> str:
    esc = html.escape
    parts = ["<h2 id='failures'>Failures, by kind</h2>"]
    refused = data.get("refused") or []
    if not data["failures"]:
        parts.append("<p>none</p>")
    for kind, records in sorted(data["failures"].items()):
        items = "".join(
            f"<li>#{r.iteration} {esc(printable(r.description))}: "
            f"{esc(printable((r.reason or '')[:160]))}</li>"
            for r in records
        )
        parts.append(f"<h3>{esc(str(kind))} ({len(records)})</h3><ul>{items}</ul>")
    if refused:
        items = "".join(
            f"<li>#{r.iteration} {esc(str(r.status))} {esc(printable(r.description))}: "
            f"{esc(printable((r.reason or '')[:200]))}</li>"
            for r in refused
        )
        parts.append(f"<h3>Better, but refused</h3><ul>{items}</ul>")
    return "".join(parts)


def _html_environment(data: dict[str, Any]) -> str:
    esc = html.escape
    env = data["environment"]
    items = [
        f"interpreter: Python {esc(env['python'])}",
        f"platform: {esc(env['platform'])}",
        f"harness at commit: {esc(str(env['harness_commit']))}",
        f"judge fingerprint: {esc(str(env['fingerprint']))}",
        f"isolation of the proposer's commands, metric and guard: "
        f"{esc(printable(str(env['isolation'])))}",
    ]
    items += [
        f"{esc(printable(name))}: sha256 {esc(str(digest))}"
        for name, digest in sorted(env["harness_files"].items())
    ]
    return (
        "<h2 id='environment'>Environment</h2><ul>"
        + "".join(f"<li>{item}</li>" for item in items)
        + "</ul>"
    )


def render_html(data: dict[str, Any], png: bytes | None) -> str:
    s = data["summary"]
    esc = html.escape
    image = ""
    if png:
        image = (
            f'<img alt="progress: every attempt by status, the best so far as a line" '
            f'src="data:image/png;base64,{base64.b64encode(png).decode()}" '
            'style="max-width:100%">'
        )
    direction = str(s["direction"])

    def row(r: AttemptRecord) -> str:
        fig = figures(r, direction)
        samples = ", ".join(_num(x) for x in r.samples or ())
        return (
            f"<tr class='{esc(r.status)}'><td>{r.iteration}</td>"
            f"<td><span class='swatch' style='background:{colour(r.status)}'></span>"
            f"{esc(r.status)}</td><td>{esc(_num(r.metric))}</td>"
            f"<td>{esc(signed(fig['gain']))}</td>"
            f"<td>{esc(signed(r.delta))}</td>"
            f"<td title='{esc(samples)}'>{fig['samples']}</td>"
            f"<td>{esc(_num(fig['spread']))}</td><td>{esc(holdout_gain(r))}</td>"
            f"<td>{esc(shown(r.metrics))}</td><td>{esc(printable(r.description))}</td>"
            f"<td>{esc(printable(r.reason or ''))}</td></tr>"
        )

    rows = "".join(row(r) for r in data["records"])
    change = gain_text(s.get("delta"), direction, s.get("improvement_pct"))
    confirmed = describe_confirmation(s["confirmed"]) if s.get("confirmed") else "not measured"
    summary = script_json(
        {
            k: s.get(k)
            for k in (
                "baseline",
                "best",
                "best_iteration",
                "counts",
                "stop_reason",
                "confidence",
                "noise",
                "confirmed",
                "direction",
                "delta",
                "improvement_pct",
            )
        }
    )
    counts = ", ".join(f"{k} {v}" for k, v in sorted(s["counts"].items()))
    better = "lower" if direction == "minimize" else "higher"
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>autoresearch: {esc(s["name"])}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; font-size: 14px; }}
td, th {{ border-bottom: 1px solid #ddd; padding: 4px 8px; text-align: left; }}
{_row_styles()}
.big {{ font-size: 20px; }}
.swatch {{ display: inline-block; width: 10px; height: 10px; border-radius: 50%;
  margin: 0 4px 0 10px; }}
td .swatch {{ margin-left: 0; }}
td:nth-child(2) {{ white-space: nowrap; }}
</style></head><body>
<h1>Campaign {esc(s["name"])}</h1>
<p class="big">baseline <b>{esc(_num(s["baseline"]))}</b> &rarr; best <b>{esc(_num(s["best"]))}</b>
({esc(change)}) at attempt {s["best_iteration"]}, {better} is better;
stop reason: {esc(str(s.get("stop_reason")))}</p>
<p>confidence that the best beats the baseline: {esc(_num(s.get("confidence")))};
noise (pooled sigma): {esc(_num(s.get("noise")))}</p>
<p>confirmed gain: {esc(confirmed)}</p>
<p>attempts: {s["iterations"]}; {esc(counts)}</p>
{image}
{_legend()}
{_html_kept(data, direction)}
{_html_failures(data)}
<h2 id='attempts'>Attempts</h2>
<table><tr><th>#</th><th>status</th><th>metric</th><th>gain</th><th>delta</th>
<th>samples</th><th>spread (sd)</th>
<th>holdout gain</th><th>metrics</th><th>description</th><th>reason</th></tr>{rows}</table>
{_html_environment(data)}
<script type="application/json" id="summary">{summary}</script>
</body></html>
"""


def _row_styles() -> str:
    """`tr.<status> td` rules, statuses of one background sharing a rule."""
    groups: dict[str, list[Status]] = {}
    for status, background in ROW_BACKGROUNDS.items():
        groups.setdefault(background, []).append(status)
    return " ".join(
        ", ".join(f"tr.{status} td" for status in statuses) + f" {{ background: {colour}; }}"
        for colour, statuses in groups.items()
    )


def write_report(state_dir: Path) -> Paths:
    data = gather(state_dir)
    image = state_dir / "progress.png"
    drawn = draw_progress(data["records"], data["summary"]["direction"], image)
    markdown = state_dir / "report.md"
    markdown.write_text(render_markdown(data, image.name if drawn else None), encoding="utf-8")
    page = state_dir / "report.html"
    page.write_text(render_html(data, image.read_bytes() if drawn else None), encoding="utf-8")
    return Paths(markdown=markdown, image=image if drawn else None, html=page)
