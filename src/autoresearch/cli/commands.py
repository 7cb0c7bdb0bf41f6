"""The `autoresearch` command line. Parsing and printing only; the work is done elsewhere."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import RenderableType
from rich.markup import escape
from rich.table import Table

from autoresearch.attempt import Status, num, rounded
from autoresearch.cli.options import (
    campaign_of,
    campaign_options,
    checkout_root,
    config_of,
    console,
    err_console,
    handle_errors,
    json_option,
    output_options,
    state_dir_of,
)
from autoresearch.cli.output import Shown, emit
from autoresearch.config import CONFIG_FILE, Campaign, load_campaign
from autoresearch.engine import Engine
from autoresearch.engine.lifecycle import RunResult
from autoresearch.errors import AutoresearchError, ConfigError
from autoresearch.events import fan_out
from autoresearch.store.ledger import StateFile, stored_object
from autoresearch.views.render import Printer, attempts_table, gain_text, imported_table, safe
from autoresearch.views.status import campaign_status, read_records, slot_line

F = TypeVar("F", bound=Callable[..., Any])


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="autoresearch")
def main() -> None:
    """Run improvement campaigns: propose one change, measure it, keep it only if better."""


@main.command()
@campaign_options
@output_options
@click.option(
    "--hypotheses",
    type=click.Path(path_type=Path),
    default=None,
    help="Markdown list or JSONL of hypotheses, one tried per attempt, in order.",
)
@click.option(
    "--unattended",
    is_flag=True,
    help="Nobody is there to approve: reject candidates touching [approval] paths at once.",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1, max=256),
    default=None,
    help="Candidates in flight at once (overrides [executor] jobs).",
)
@click.option(
    "--more",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Extend the campaign by N attempts beyond its last (a finished one too).",
)
@click.option(
    "--ci",
    is_flag=True,
    help="For schedulers: attempts on stderr, a JSON summary on stdout; exit 0 improved, "
    "4 not improved, else the failure's code.",
)
@handle_errors
def run(
    config_path: Path | None,
    campaign_name: str | None,
    max_iterations: int | None,
    quiet: bool,
    plain: bool,
    hypotheses: Path | None,
    unattended: bool = False,
    jobs: int | None = None,
    more: int | None = None,
    ci: bool = False,
) -> None:
    """Run or resume the campaign."""
    try:
        _run(config_path, campaign_name, max_iterations, quiet, plain, hypotheses,
             unattended, jobs, more, ci)  # fmt: skip
    except AutoresearchError as exc:
        if ci:  # the JSON on stdout whatever happens; the sentence on stderr as usual
            from autoresearch.cli.ci import ci_failure

            click.echo(json.dumps(ci_failure(str(exc), exc.exit_code), indent=2))
        raise


def _run(
    config_path: Path | None,
    campaign_name: str | None,
    max_iterations: int | None,
    quiet: bool,
    plain: bool,
    hypotheses: Path | None,
    unattended: bool,
    jobs: int | None,
    more: int | None,
    ci: bool,
) -> None:
    from autoresearch.cli.ci import ci_summary, more_attempts
    from autoresearch.store.ledger import Ledger

    campaign = campaign_of(config_path, campaign_name)
    plateau_after = 0
    if more is not None:
        max_iterations, plateau_after = more_attempts(campaign, more, max_iterations)
    before = Ledger(campaign.state_dir).read() if ci else []
    if hypotheses is not None:
        from autoresearch.learning.ideas import queue_file

        added = queue_file(campaign, hypotheses)
        out = err_console if ci else console
        out.print(f"{len(added)} new hypotheses queued from {safe(str(hypotheses))}")
    result = run_engine(
        campaign,
        max_iterations,
        quiet=quiet,
        plain=plain,
        unattended=unattended,
        jobs=jobs,
        plateau_after=plateau_after,
        ci=ci,
    )
    if ci:
        data, code = ci_summary(campaign, before, result)
        click.echo(json.dumps(data, indent=2))
        sys.exit(code)
    if result.exit_code == 0:
        from autoresearch.cli.confirm import confirm_at_end

        confirm_at_end(campaign, quiet)
    sys.exit(result.exit_code)


@main.command()
@click.argument("iteration", type=int)
@campaign_options
@handle_errors
def approve(iteration: int, config_path: Path | None, campaign_name: str | None) -> None:
    """Approve parked attempt N: its change is re-checked on top of the current best and
    kept only if it still wins (exit 0 when kept, 1 when not)."""
    from autoresearch.checks.approval import ApprovedChange, parked

    campaign = campaign_of(config_path, campaign_name)
    record = parked(read_records(campaign.state_dir), iteration)
    engine = Engine(campaign, proposer=ApprovedChange(), on_event=Printer(console), approve=record)
    result = engine.run()
    last = engine.records[-1] if engine.records else None
    if result.exit_code or last is None or last.approval_of != iteration:
        sys.exit(result.exit_code or 1)
    console.print(
        f"attempt {iteration} approved: re-checked as attempt {last.iteration}, "
        f"{last.status}" + (f" ({safe(last.reason)})" if last.reason else "")
    )
    sys.exit(0 if last.status is Status.KEEP else 1)


@main.command()
@click.argument("iteration", type=int)
@click.option("--reason", default=None, help="Why (recorded as the attempt's reason).")
@campaign_options
@handle_errors
def reject(
    iteration: int, reason: str | None, config_path: Path | None, campaign_name: str | None
) -> None:
    """Reject parked attempt N: it is recorded as rejected and never kept."""
    from autoresearch.checks.approval import reject as reject_attempt

    campaign = campaign_of(config_path, campaign_name)
    record = reject_attempt(campaign, iteration, reason)
    console.print(f"attempt {iteration} rejected (recorded as attempt {record.iteration})")


def run_engine(
    campaign: Campaign,
    max_iterations: int | None,
    *,
    quiet: bool,
    plain: bool,
    unattended: bool = False,
    jobs: int | None = None,
    plateau_after: int = 0,
    ci: bool = False,
) -> RunResult:
    """Run the engine with the live view on a terminal, else one line per attempt (on
    stderr with `ci`, whose stdout is the JSON summary's)."""
    from autoresearch.views.tracking import make_tracker

    if ci or quiet or plain or not console.is_terminal:
        printer = Printer(err_console if ci else console, quiet=quiet)
        tracker = make_tracker(campaign, printer)
        engine = Engine(
            campaign,
            on_event=fan_out(printer, tracker),
            max_iterations=max_iterations,
            unattended=unattended,
            jobs=jobs,
            plateau_after=plateau_after,
        )
        return engine.run()
    from autoresearch.views.live import LiveView

    cap = campaign.config.stop.max_iterations if max_iterations is None else max_iterations
    direction = str(campaign.config.metric.direction)
    with LiveView(console, campaign.name, direction, cap) as view:
        tracker = make_tracker(campaign, view)
        engine = Engine(
            campaign,
            on_event=fan_out(view, tracker),
            max_iterations=max_iterations,
            unattended=unattended,
            jobs=jobs,
            plateau_after=plateau_after,
        )
        result = engine.run()
    Printer(console, quiet=True).stop_summary(result, campaign)
    return result


@main.command()
@campaign_options
@json_option
@handle_errors
def status(config_path: Path | None, campaign_name: str | None, as_json: bool) -> None:
    """Show the campaign's baseline, best and counts (works while it runs)."""
    data = campaign_status(state_dir_of(config_path, campaign_name))
    emit(Shown(data, lambda: status_lines(data)), as_json)


def status_lines(data: dict[str, Any]) -> list[str]:
    """`status` as rich markup lines, every value from the ledger or state escaped."""
    if data["running"]:
        attempt = data.get("current_iteration")
        doing = f"attempt {attempt}, {data['phase']}" if attempt is not None else data["phase"]
        state = f"running (pid {data['pid']}, {doing})"
    elif data.get("waiting"):
        state = "waiting for the next `autoresearch step`"
    else:
        state = f"stopped: {data['stop_reason'] or 'never finished'}"
    direction = safe(str(data["direction"]))
    lines = [f"[bold]{safe(str(data['name']))}[/] ({direction}) — {safe(state)}"]
    for slot in data.get("slots") or []:
        lines.append(safe(slot_line(slot)))
    noise = data.get("noise_robust") or data.get("noise")  # what the digits shown can say
    change = gain_text(
        data.get("delta"), str(data["direction"]), data.get("improvement_pct"), noise
    )
    commit = safe(f" [{data['best_commit'][:10]}]") if data.get("best_commit") else ""
    lines.append(
        f"baseline {num(data['baseline'], noise)}   best {num(data['best'], noise)} ({change})"
        f" at attempt {data['best_iteration']}{commit}"
    )
    if data.get("noise") is not None:
        pct = data.get("noise_pct")
        conf = data.get("confidence")
        robust, robust_pct = data.get("noise_robust"), data.get("noise_robust_pct")
        lines.append(
            f"noise: sigma {num(data['noise'])}"
            + ("" if pct is None else f" ({pct:.2f}% of the baseline)")
            + ("" if robust is None else f", robust sigma {num(robust)}")
            + ("" if robust_pct is None else f" ({robust_pct:.2f}%)")
            + ("" if conf is None else f"; confidence that the best beats the baseline {conf:.3f}")
        )
    if data.get("decision"):
        lines.append(safe(str(data["decision"])))
    if data.get("detectable"):
        lines.append(safe(str(data["detectable"])))
    if data.get("noise_shape"):
        lines.append(safe(f"noise shape: {data['noise_shape']}"))
    for switch in data.get("estimator_switches") or []:
        lines.append(safe(str(switch)))
    counts = ", ".join(f"{k} {v}" for k, v in sorted(data["attempt_counts"].items()))
    cap = data.get("max_iterations")
    of = f" of {cap}" if cap is not None else ""
    lines.append(f"attempts {data['iterations']}{of}: {counts or 'none yet'}")
    if data.get("cost_usd") or data.get("tokens_in") or data.get("tokens_out"):
        lines.append(
            f"cost ${data['cost_usd']:.4f}; tokens {data['tokens_in']} in, {data['tokens_out']} out"
        )
    for key in ("escalation", "diminishing_returns"):
        if data.get(key):
            lines.append(safe(str(data[key])))
    lines.append(f"branch {safe(data['branch'])}   ledger {safe(data['ledger'])}")
    return lines


@main.command(name="log")
@campaign_options
@json_option
@handle_errors
def log_(config_path: Path | None, campaign_name: str | None, as_json: bool) -> None:
    """List every attempt."""
    from autoresearch.agent.importing import read_imported

    state_dir = state_dir_of(config_path, campaign_name)
    imported = read_imported(state_dir)
    try:
        records = read_records(state_dir)
    except AutoresearchError:
        if not imported:
            raise
        records = []  # only a history brought in by `import pi` so far

    def lines() -> Iterable[RenderableType]:
        if imported:
            yield imported_table(imported)
            source = safe(str(imported[0].get("source")))
            yield (
                f"{len(imported)} prior attempts imported from {source}: self-reported, "
                "shown for reference, never used in a decision"
            )
        if not records:
            yield "no attempts yet (the engine is starting)"
            return
        direction = str(StateFile(state_dir).read().get("direction") or "minimize")
        from autoresearch.store.summary import summarize

        noise = summarize(state_dir.name, direction, records).noise
        yield attempts_table(records, direction=direction, noise=noise)

    emit(Shown([stored_object(r) for r in records], lines), as_json)


@main.command()
@campaign_options
@json_option
@handle_errors
def ideas(config_path: Path | None, campaign_name: str | None, as_json: bool) -> None:
    """The hypothesis queue and the ideas backlog, with the outcome of each."""
    from autoresearch.learning.ideas import listing

    found = listing(checkout_root(), config_of(config_path, campaign_name))

    def lines() -> Iterable[str]:
        if not found:
            yield "no hypotheses queued and no ideas in the backlog yet"
        for e in found:
            where = f"#{e.iteration} {e.outcome}" if e.iteration is not None else e.outcome
            result = f" metric {num(e.metric)}" if e.metric is not None else ""
            yield f"{e.source:10} {safe(where)}{result}: {safe(e.text)}"

    emit(Shown([e.to_json() for e in found], lines), as_json)


@main.command()
@click.option("--force", is_flag=True, help="Overwrite an existing autoresearch.toml.")
@handle_errors
def init(force: bool) -> None:
    """Write a commented autoresearch.toml for this repository."""
    from autoresearch.config.template import render_init

    root = checkout_root()
    target = root / CONFIG_FILE
    if target.exists() and not force:
        raise ConfigError(f"{CONFIG_FILE} already exists; edit it, or pass --force to replace it.")
    target.write_text(render_init(root), encoding="utf-8")
    console.print(
        f"wrote {escape(str(target))}; edit goal, scope, metric and proposer, run "
        "`autoresearch check`, and commit it: a campaign starts from your last commit but "
        "reads this file as it is on disk."
    )


@main.command()
@click.option(
    "--port",
    type=click.IntRange(min=0, max=65535),
    default=8765,
    show_default=True,
    help="Port to listen on (0 picks a free one).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    help="Interface to listen on (default 127.0.0.1, this machine only).",
)
@campaign_options
@handle_errors
def dashboard(port: int, host: str, config_path: Path | None, campaign_name: str | None) -> None:
    """Serve a live, read-only page of the campaign."""
    from autoresearch.views.dashboard import make_server

    root = checkout_root()
    state_dir = state_dir_of(config_path, campaign_name)
    try:
        server = make_server(root, state_dir, host, port)
    except OSError as exc:
        raise AutoresearchError(
            f"cannot listen on {host}:{port} ({exc.strerror}); choose another --port."
        ) from None
    # The address carries the token: the page answers nothing without it.
    console.print(f"dashboard of campaign '{state_dir.name}' at {server.url()} (Ctrl-C to stop)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


@main.command()
@click.option("--open", "open_it", is_flag=True, help="Open report.html in a browser.")
@campaign_options
@json_option
@handle_errors
def report(
    open_it: bool, config_path: Path | None, campaign_name: str | None, as_json: bool
) -> None:
    """Write report.md, progress.png and report.html for the campaign."""
    from autoresearch.views.report import write_report

    paths = write_report(state_dir_of(config_path, campaign_name))
    data = {
        "markdown": str(paths.markdown),
        "html": str(paths.html),
        "image": str(paths.image) if paths.image else None,
    }

    def lines() -> Iterable[str]:
        yield f"report: {paths.markdown}\nhtml:   {paths.html}"
        if paths.image is None:
            yield "no chart: install matplotlib (pip install 'autoresearch[report]')"
        else:
            yield f"chart:  {paths.image}"

    emit(Shown(data, lines), as_json)
    if open_it:
        import webbrowser

        try:
            opened = webbrowser.open(paths.html.as_uri())
        except webbrowser.Error:
            opened = False
        if not opened:
            err_console.print(
                f"no browser found to open it; the report is at {safe(str(paths.html))}"
            )


@main.command()
@click.argument("iteration", type=int)
@campaign_options
@json_option
@handle_errors
def show(
    iteration: int, config_path: Path | None, campaign_name: str | None, as_json: bool
) -> None:
    """One attempt in full: status, samples, description, reason, timings, cost, and every
    log it left (prompt, proposer, each metric sample, guard)."""
    from autoresearch.store.results import attempt, attempt_logs, refused_banner, refused_change

    state_dir = state_dir_of(config_path, campaign_name)
    found = attempt(state_dir, iteration)
    record = stored_object(found)
    logs = attempt_logs(state_dir, iteration)
    refused = refused_change(state_dir, iteration)

    direction = str(StateFile(state_dir).read().get("direction") or "minimize")

    def lines() -> Iterable[str]:
        for key, value in record.items():
            if key == "prev_hash":
                continue
            value = rounded(value)  # six significant digits to read; --json keeps them all
            text = json.dumps(value) if isinstance(value, list | dict) else str(value)
            if key == "delta" and isinstance(value, int | float):
                text = gain_text(value, direction)  # the gain, the raw delta beside it
            yield f"[bold]{safe(key)}[/]: {safe(text, one_line=False)}"
        if logs:
            yield "[bold]logs[/]:"
            for path in logs:
                yield f"  {safe(str(path))} ({path.stat().st_size} bytes)"
        if refused is not None:
            yield f"[bold red]{safe(refused_banner(state_dir, found))}[/]"
            yield safe(refused.rstrip("\n"), one_line=False)

    data = {**record, "logs": [str(p) for p in logs]}
    if refused is not None:
        data["refused_diff"] = refused
    emit(Shown(data, lines), as_json)


@main.command()
@click.argument("iteration", type=int, required=False)
@campaign_options
@handle_errors
def diff(iteration: int | None, config_path: Path | None, campaign_name: str | None) -> None:
    """The campaign's change (its base to the best result), or attempt N's own change."""
    from autoresearch.store.results import (
        attempt,
        campaign_diff_chunks,
        diff_chunks,
        refused_banner,
        refused_change,
    )
    from autoresearch.views.render import printable_chunks

    root = checkout_root()
    state_dir = state_dir_of(config_path, campaign_name)
    chunks: Iterable[bytes]
    if iteration is None:
        chunks = campaign_diff_chunks(root, state_dir)
        nothing = "the campaign has kept no change yet: its best is the baseline"
    else:
        record = attempt(state_dir, iteration)
        refused = refused_change(state_dir, iteration)
        if refused is not None:
            # Marked, and escaped as any change: the refused files are text, not orders.
            console.print(safe(refused_banner(state_dir, record)))
            chunks = iter([refused.encode("utf-8", errors="replace")])
        else:
            chunks = diff_chunks(root, record)
        start = ", the campaign's starting point," if record.status is Status.BASELINE else ""
        nothing = f"attempt {iteration} ({record.status}){start} changed nothing"
        if record.status.traits.rejects_content and refused is None:
            nothing = (
                f"attempt {iteration} ({record.status}) was refused and its content was not "
                f"kept: {record.reason}"
            )
    # A piece at a time, every control character shown as an escape: the candidate's
    # files are text here, never instructions to the terminal.
    last = ""
    for text in printable_chunks(chunks):
        click.echo(text, nl=False)
        last = text
    if not last:
        console.print(nothing)
    elif not last.endswith("\n"):
        click.echo()


@main.command()
@click.argument("name")
@click.option(
    "--attempt",
    "iteration",
    type=int,
    default=None,
    help="The attempt to branch at (default: the best result).",
)
@click.option("--force", is_flag=True, help="Move the branch if it exists; allow a failed attempt.")
@click.option(
    "--minimal", is_flag=True, help="Only the kept changes that carry the gain (see `ablate`)."
)
@campaign_options
@json_option
@handle_errors
def branch(
    name: str,
    iteration: int | None,
    force: bool,
    minimal: bool,
    config_path: Path | None,
    campaign_name: str | None,
    as_json: bool,
) -> None:
    """Create a branch at the best result (or at attempt N, or the ablation's minimal one)."""
    from autoresearch.store.results import chosen_commit, make_branch

    root = checkout_root()
    state_dir = state_dir_of(config_path, campaign_name)
    if minimal:
        from autoresearch.checks.ablation import minimal_commit

        if iteration is not None:
            raise ConfigError("--minimal and --attempt choose different commits; pass one.")
        commit, found = minimal_commit(state_dir)
        make_branch(root, name, commit, force)
        carrying = ", ".join(f"#{i}" for i in found.get("carrying", []))
        text = f"branch {safe(name)} at {commit[:10]} (only {carrying or 'nothing'})"
        data = {"branch": name, "commit": commit, "carrying": carrying}
        emit(Shown(data, lambda: [text], compact=True), as_json)
        return
    commit, record = chosen_commit(state_dir, iteration, force)
    make_branch(root, name, commit, force)
    text = (
        f"branch {safe(name)} at {commit[:10]} "
        f"(attempt {record.iteration}: {safe(record.description)})"
    )
    answer = {"branch": name, "commit": commit, "iteration": record.iteration}
    emit(Shown(answer, lambda: [text], compact=True), as_json)


@main.command()
@campaign_options
@json_option
@handle_errors
def ablate(config_path: Path | None, campaign_name: str | None, as_json: bool) -> None:
    """Leave each kept change out of the best, measure it with the decision rule, and say
    which changes carry the gain (then `branch NAME --minimal`)."""
    from autoresearch.checks.ablation import markdown, run_ablation

    campaign = campaign_of(config_path, campaign_name)
    report = run_ablation(campaign, warn=lambda m: err_console.print(f"warning: {escape(m)}"))
    emit(Shown(report.to_json(), lambda: [escape(markdown(report))]), as_json)


@main.command()
@click.option("--force", is_flag=True, help="Replace the branches of an earlier finalize.")
@campaign_options
@json_option
@handle_errors
def finalize(
    force: bool, config_path: Path | None, campaign_name: str | None, as_json: bool
) -> None:
    """Split the kept changes into branches from the campaign's base, one per change (or
    per group that must stay together), each with its measured effect in the commit
    message, to review and merge one by one."""
    from autoresearch.checks.finalize import finalize as split

    root = checkout_root()
    state_dir = state_dir_of(config_path, campaign_name)
    pieces = split(root, state_dir, read_records(state_dir), force)
    direction = str(StateFile(state_dir).read().get("direction") or "minimize")

    def lines() -> Iterable[str]:
        for piece in pieces:
            attempts = ", ".join(f"#{i}" for i in piece.attempts)
            effect = "; ".join(
                gain_text(r.delta, direction) for r in piece.changes if r.delta is not None
            )
            yield f"{safe(piece.branch)}  {piece.commit[:10]}  {attempts}: {effect}"
            if piece.why:
                yield f"  together: {safe(piece.why)}"
        yield (
            f"{len(pieces)} branches from the campaign's base; review and merge each on its "
            "own (`git log -1 BRANCH` shows its measured effect)"
        )

    emit(Shown([p.to_json(direction) for p in pieces], lines), as_json)


@main.command(name="apply")
@click.option(
    "--attempt",
    "iteration",
    type=int,
    default=None,
    help="The attempt to apply (default: the best result).",
)
@click.option("--force", is_flag=True, help="Apply a failed attempt too.")
@campaign_options
@json_option
@handle_errors
def apply_(
    iteration: int | None,
    force: bool,
    config_path: Path | None,
    campaign_name: str | None,
    as_json: bool,
) -> None:
    """Merge the campaign's change (its base to the best result, or to attempt N) into your
    clean working tree, uncommitted; your commits since the campaign started stay."""
    from autoresearch.store.results import apply_changes, chosen_commit

    root = checkout_root()
    state_dir = state_dir_of(config_path, campaign_name)
    _, record = chosen_commit(state_dir, iteration, force)
    files = apply_changes(root, state_dir, record).files
    text = (
        f"applied the change of attempt {record.iteration} to your working tree (not "
        "committed): " + safe(", ".join(files))
        if files
        else "nothing to apply: your HEAD already holds that change"
    )
    data = {"iteration": record.iteration, "files": files}
    emit(Shown(data, lambda: [text], compact=True), as_json)


@main.command(name="list")
@json_option
@handle_errors
def list_(as_json: bool) -> None:
    """Every campaign in this repository: state, best, attempts, disk used."""
    from autoresearch.cli.housekeeping import list_campaigns

    campaigns = list_campaigns(checkout_root())
    emit(Shown([c.to_json() for c in campaigns], lambda: campaign_lines(campaigns)), as_json)


def campaign_lines(campaigns: list[Any]) -> list[RenderableType]:
    from autoresearch.cli.housekeeping import human_bytes

    if not campaigns:
        return ["no campaigns in this repository yet; start one with `autoresearch run`"]
    table = Table(show_edge=False, header_style="bold")
    for column in ("campaign", "state", "baseline", "best", "attempts", "disk"):
        table.add_column(column, justify="left" if column in ("campaign", "state") else "right")
    for c in campaigns:
        state = f"running (pid {c.pid})" if c.state == "running" else c.state
        if c.stop_reason:
            state += f": {c.stop_reason}"
        best = num(c.best) + (f" (#{c.best_iteration})" if c.best_iteration else "")
        table.add_row(
            safe(c.name),
            safe(state),
            num(c.baseline),
            best,
            str(c.attempts),
            human_bytes(c.disk_bytes),
        )
    return [table]


@main.command()
@click.argument("name")
@click.option("--branch", "with_branch", is_flag=True, help="Delete its branch too.")
@handle_errors
def clean(name: str, with_branch: bool) -> None:
    """Remove a campaign's workspace, logs and attempt refs (not its ledger); refused while
    it runs. Its branch stays unless --branch."""
    from autoresearch.cli.housekeeping import clean_campaign, human_bytes

    done = clean_campaign(checkout_root(), name, with_branch)
    if not done.removed:
        console.print(f"campaign '{safe(name)}' has nothing left to clean")
        return
    kept = "" if done.branch_removed else f"; branch autoresearch/{safe(name)} kept"
    console.print(
        f"cleaned campaign '{safe(name)}': removed {safe(', '.join(done.removed))} "
        f"({human_bytes(done.freed_bytes)} freed){kept}; its ledger stays"
    )


@main.command()
@click.argument("name")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=300.0,
    show_default=True,
    help="Seconds to wait for the engine to stop.",
)
@handle_errors
def stop(name: str, timeout: float) -> None:
    """Stop a running campaign: the attempt in flight is rolled back and logged."""
    from autoresearch.cli.housekeeping import stop_campaign

    stopped = stop_campaign(checkout_root(), name, timeout)
    console.print(
        f"stopped campaign '{safe(name)}' (engine pid {stopped.pid}, "
        f"{stopped.seconds:.1f} s): stop reason {stopped.stop_reason or 'interrupted'}"
    )


@main.command()
@campaign_options
@json_option
@handle_errors
def verify(config_path: Path | None, campaign_name: str | None, as_json: bool) -> None:
    """Check the ledger's hash chain, the attempt refs and the branch."""
    from autoresearch.checks.verify import verify_campaign
    from autoresearch.views.status import is_running

    root = checkout_root()
    state_dir = state_dir_of(config_path, campaign_name)
    campaign: Campaign | None = None
    try:  # the rule to re-derive the verdicts with; without a config, the chain is checked
        campaign = campaign_of(config_path, campaign_name or state_dir.name)
    except AutoresearchError:
        if config_path is not None:
            raise
    report = verify_campaign(
        root, state_dir, state_dir.name, running=is_running(state_dir), campaign=campaign
    )
    data = {
        "ok": report.ok,
        "records": report.records,
        "problems": report.problems,
        "rule": report.rule,  # None: the verdicts were not re-derived
        "notes": report.notes,
    }

    def lines() -> Iterable[str]:
        if not report.ok:
            yield from (f"[red]problem:[/] {safe(problem)}" for problem in report.problems)
            return
        verdicts = (
            f"every verdict follows from its samples under rule {report.rule}"
            if report.rule
            else "verdicts NOT re-derived (no config of this campaign found; pass --config)"
        )
        yield from (f"[yellow]note:[/] {safe(note)}" for note in report.notes)
        if report.notes and report.rule:
            verdicts = (
                f"every verdict of this version of the rule follows from its samples under "
                f"rule {report.rule}; the {len(report.notes)} notes above are on verdicts of "
                "an earlier version, which this one would not give"
            )
        yield (
            f"ok: {report.records} records, hash chain intact, every attempt's ref "
            f"matches, the branch is at the best kept commit, {verdicts}"
        )

    emit(Shown(data, lines), as_json)
    sys.exit(0 if report.ok else 1)


@main.command()
@click.argument("example", required=False)
@click.option(
    "--dir",
    "directory",
    type=click.Path(path_type=Path),
    default=None,
    help="Where to create the demo repository (default: a new temporary folder).",
)
@output_options
@handle_errors
def demo(
    example: str | None,
    directory: Path | None,
    max_iterations: int | None,
    quiet: bool,
    plain: bool,
) -> None:
    """Run a bundled example campaign offline in a fresh repository."""
    import autoresearch.cli.demo as demos

    name = example or demos.DEFAULT
    target = demos.prepare(name, directory)
    demos.use_this_python()
    console.print(f"[bold]demo[/] {name}: a fresh git repository in {target}")
    campaign = load_campaign(target)
    result = run_engine(campaign, max_iterations, quiet=quiet, plain=plain)
    console.print()
    console.print("[bold]Look at the result:[/]")
    console.print(f"  cd {target}")
    console.print("  autoresearch status          # baseline, best, counts")
    console.print("  autoresearch log             # every attempt")
    console.print("  autoresearch diff            # the best change, as a diff")
    console.print(f"  ledger: {campaign.state_dir / 'ledger.jsonl'}")
    if result.summary.get("baseline") is not None:
        from autoresearch.views.report import write_report

        paths = write_report(campaign.state_dir)
        console.print(f"  report: {paths.markdown} and {paths.html}")
    sys.exit(result.exit_code)


@main.command()
@campaign_options
@click.option(
    "--repeat",
    type=click.IntRange(min=1, max=1000),
    default=1,
    help="Run the metric N times and print its spread.",
)
@click.option(
    "--offline", is_flag=True, help="Do not contact the proposer's endpoint (chat kinds)."
)
@json_option
@handle_errors
def check(
    config_path: Path | None, campaign_name: str | None, repeat: int, offline: bool, as_json: bool
) -> None:
    """Validate the config and the proposer, and run metric and guard once on the current
    commit."""
    from autoresearch.cli.preflight import compact_paths, run_check

    campaign = campaign_of(config_path, campaign_name)
    report = run_check(campaign, repeat=repeat, offline=offline)
    proposer = report.proposer
    data = {
        "ok": report.ok,
        "commit": report.commit,
        "values": report.values(),
        "spread": report.spread(),
        "noise": report.noise_figures() or None,
        "recommended": report.recommendation() if repeat > 1 else None,
        "detectable_pct": report.detectable_pct() if repeat > 1 else None,
        "metric_errors": [m.reason for m in report.metric if not m.ok],
        "guard": None
        if report.guard is None
        else {"ok": report.guard.ok, "reason": report.guard.reason},
        "harness": report.harness,
        "hidden_paths": report.hidden,
        "proposer": None
        if proposer is None
        else {
            "kind": proposer.kind,
            "ok": proposer.ok,
            "detail": proposer.detail,
            "problem": proposer.problem or None,
        },
        "decision": report.decision,
        "isolation": report.isolation,
        "abstract_sockets": report.sockets,
        "proposer_network": [
            {"network": n.mode, "allow_hosts": [str(h) for h in n.hosts]} for n in report.network
        ],
        "home_visible": report.home,
        "keyrings": report.keyrings,
        "holdout_run": report.holdout or None,
        "limits": report.limits,
        "gpu": None if report.gpu is None else report.gpu.data(report.devices),
    }

    def lines() -> Iterable[str]:
        yield (
            f"config {escape(campaign.display_path())}: ok (campaign '{escape(campaign.name)}', "
            f"commit {report.commit[:10]})"
        )
        if proposer is not None:
            if proposer.ok:
                yield f"proposer: {escape(proposer.detail)}"
            else:
                yield f"[red]proposer cannot work:[/] {escape(proposer.problem)}"
        for network in report.network:
            yield f"proposer network: {escape(network.text())}"
        yield f"decision: {escape(report.decision)}"
        yield f"isolation: {escape(report.isolation)}"
        if report.sockets:
            yield f"abstract unix sockets: {escape(report.sockets)}"
        if report.home:
            yield f"home folder: {escape(report.home)}"
        if report.keyrings:
            yield f"kernel keyrings: {escape(report.keyrings)}"
        if report.holdout:
            yield f"holdout run: {escape(report.holdout)}"
        yield f"limits: {escape(report.limits)}"
        if report.gpu is not None:
            yield from (escape(line) for line in report.gpu.lines(report.devices))
            warning = report.gpu.warning(report.devices)
            if warning:
                yield f"[yellow]warning:[/] {escape(warning)}"
        if report.harness:
            yield "harness: " + escape(compact_paths(report.harness))
        for problem in report.hidden:
            yield f"[red]cannot work:[/] {escape(problem)}"
        for k, m in enumerate(report.metric, 1):
            label = f"metric run {k}" if repeat > 1 else "metric"
            if m.ok:
                yield f"{label}: {num(m.value)} ({m.seconds:.2f} s)"
            else:
                yield (
                    f"[red]{label} failed:[/] {escape(m.reason)}; output in "
                    f"{escape(str(m.stdout_path))}"
                )
        spread = report.spread()
        if repeat > 1 and spread:
            yield "spread: " + "  ".join(f"{k} {num(v)}" for k, v in spread.items())
            figures = report.noise_figures()
            if figures:
                yield (
                    f"noise: robust sigma {num(figures['robust_sigma'])} (spikes left out), "
                    f"sigma {num(figures['sigma'])}"
                )
            detectable = report.detectable_pct()
            if detectable is not None:
                yield (
                    f"detectable: gains of about {detectable:.2g}% or more are kept 4 times in "
                    f"5 within max_samples = {report.max_samples} runs a side at this spread"
                )
            advice = report.recommendation()
            yield (
                f"recommended: rule = {escape(advice['rule'])}, min_delta = {advice['min_delta']}"
            )
        if report.guard is not None:
            if report.guard.ok:
                yield f"guard: passed ({report.guard.seconds:.2f} s)"
            else:
                yield f"[red]guard failed:[/] {escape(report.guard.reason)}"

    emit(Shown(data, lines), as_json)
    sys.exit(0 if report.ok else 1)


# The agent-driven mode's commands live in their own module (it imports this one).
from autoresearch.agent.commands import register as _register_agent_commands  # noqa: E402

_register_agent_commands(main)


def _register() -> None:
    # Defined in their own module (they import this one's options): added here.
    from autoresearch.cli.confirm import compare_cmd, confirm_cmd

    main.add_command(confirm_cmd)
    main.add_command(compare_cmd)


_register()
