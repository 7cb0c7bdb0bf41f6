"""The `confirm` and `compare` commands (registered on the main group by `cli`)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from autoresearch.cli.options import (
    campaign_of,
    campaign_options,
    console,
    err_console,
    handle_errors,
    json_option,
)
from autoresearch.cli.output import Shown, emit
from autoresearch.config import Campaign
from autoresearch.measure.confirm import Outcome, compare, confirm, describe
from autoresearch.stats.paired import DEFAULT_PAIRS, MOST_PAIRS, MOST_REPEAT, pairs_asked
from autoresearch.views.render import safe

repeat_option = click.option(
    "--repeat",
    type=click.IntRange(min=1, max=MOST_REPEAT),
    default=None,
    help=(
        f"Interleaved pairs of runs (each pair runs both versions once); exactly these "
        f"unless --up-to is given. Default: {DEFAULT_PAIRS}, and {DEFAULT_PAIRS} more "
        "where they leave a gain open."
    ),
)
up_to_option = click.option(
    "--up-to",
    type=click.IntRange(min=1, max=MOST_PAIRS),
    default=None,
    help="The most pairs: more are taken, up to this many, where the first leave a gain open.",
)


def _pairs(repeat: int | None, up_to: int | None) -> tuple[int, int]:
    """The pairs the options ask for; a combination that cannot be is a usage error."""
    try:
        return pairs_asked(repeat, up_to, ("--repeat", "--up-to"))
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


def _progress(quiet: bool) -> object:
    """Progress on one line that rewrites itself, on a terminal only: in a log or a pipe
    the carriage returns would run the lines together."""

    def show(side: str, pair: int, pairs: int) -> None:
        if not quiet and err_console.is_terminal:
            err_console.print(f"pair {pair}/{pairs}: measuring {side}", end="\r")

    return show


def _print(outcome: Outcome, as_json: bool) -> None:
    data = outcome.to_json()
    # Escaped whole: a commit in brackets reads as markup to rich, which drops it.
    pair = safe(
        f"A {outcome.a.label} [{outcome.a.commit[:10]}], "
        f"B {outcome.b.label} [{outcome.b.commit[:10]}]; "
        f"samples in {'the report' if outcome.a.label == 'baseline' else '--json'}"
    )
    emit(Shown(data, lambda: [safe(describe(data)), pair]), as_json)


@click.command(name="confirm")
@campaign_options
@repeat_option
@up_to_option
@json_option
@handle_errors
def confirm_cmd(
    config_path: Path | None,
    campaign_name: str | None,
    repeat: int | None,
    up_to: int | None,
    as_json: bool,
) -> None:
    """Measure the best kept commit against the baseline in interleaved pairs: the gain
    with a confidence interval, beside the raw one the ledger recorded."""
    pairs, most = _pairs(repeat, up_to)
    campaign = campaign_of(config_path, campaign_name)
    outcome = confirm(campaign, pairs, _progress(as_json), most)  # type: ignore[arg-type]
    _print(outcome, as_json)
    sys.exit(0)


@click.command(name="compare")
@click.argument("a")
@click.argument("b")
@campaign_options
@repeat_option
@up_to_option
@json_option
@handle_errors
def compare_cmd(
    a: str,
    b: str,
    config_path: Path | None,
    campaign_name: str | None,
    repeat: int | None,
    up_to: int | None,
    as_json: bool,
) -> None:
    """Measure two versions in interleaved pairs (A and B: 'baseline', 'best', an attempt
    number or a commit); B's gain over A with a confidence interval."""
    pairs, most = _pairs(repeat, up_to)
    campaign = campaign_of(config_path, campaign_name)
    outcome = compare(campaign, a, b, pairs, _progress(as_json), most)  # type: ignore[arg-type]
    _print(outcome, as_json)
    sys.exit(0)


def confirm_at_end(campaign: Campaign, quiet: bool) -> None:
    """After a campaign that kept something under a noisy rule: confirm its best."""
    from autoresearch.errors import AutoresearchError
    from autoresearch.stats.auto_rule import resolve
    from autoresearch.store.ledger import Ledger

    cfg = campaign.config
    pairs, most = cfg.decision.confirm_pairs()
    records = Ledger(campaign.state_dir).read()
    if not pairs or not records or not any(r.status.name == "KEEP" for r in records):
        return
    rule = resolve(cfg.decision.to_rule(), records[0].samples or ())
    if rule.name in ("strict", "threshold"):
        return  # an exact metric (or one judged by a single run): nothing to confirm
    if not quiet:
        more = f", up to {most} where they leave a gain open" if most > pairs else ""
        console.print(
            f"confirming the best against the baseline ({pairs} interleaved pairs{more})..."
        )
    try:
        outcome = confirm(campaign, pairs, _progress(quiet), most)  # type: ignore[arg-type]
    except AutoresearchError as exc:
        console.print(f"[yellow]could not confirm the best:[/] {safe(str(exc))}")
        return
    console.print(safe(describe(outcome.to_json())))
