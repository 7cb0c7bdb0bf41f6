"""Numbers a person reads: rounded to what their noise supports (or six significant
digits), never float noise like -1.8599999999999994; the direction-aware gain with the raw
delta beside it; JSON keeps full precision."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from autoresearch.attempt import num, rounded
from autoresearch.views.render import gain_text
from campaigns import campaign_toml
from conftest import Runner, git, make_repo


@pytest.mark.parametrize(
    ("value", "noise", "shown"),
    [
        (-1.8599999999999994, None, "-1.86"),
        (42.85999999999999, None, "42.86"),
        (42.8612, 0.13, "42.86"),
        (42.8612, 1.3, "42.9"),
        (12345.678, 250.0, "12350"),
        (0.001234567, 0.00002, "0.001235"),
        (123456.789, 0.0001, "123457"),  # never more than six significant digits
        (7.0, 0.0, "7"),
        (None, 1.0, "-"),
    ],
)
def test_a_value_is_shown_to_the_digits_its_noise_supports(
    value: float | None, noise: float | None, shown: str
) -> None:
    assert num(value, noise) == shown


def test_one_gain_convention_with_the_raw_delta_beside_it() -> None:
    assert gain_text(-1.8599999999999994, "minimize") == "gain +1.86, delta -1.86"
    assert gain_text(-1.8599999999999994, "maximize") == "gain -1.86, delta -1.86"
    assert gain_text(-1.8599999999999994, "minimize", 8.7, noise=3.0) == (
        "gain +1.9 (+8.70%), delta -1.9"
    )
    assert rounded({"a": [0.1 + 0.2], "b": "x"}) == {"a": [0.3], "b": "x"}


def float_noise(text: str) -> list[str]:
    """Numbers that end in a binary float's tail (…9999x, …0000x); a commit's hex is not one."""
    return re.findall(r"(?<![0-9a-f])\d+\.\d*(?:9999|00000)\d*(?![0-9a-f])", text)


def agent_repo(tmp_path: Path) -> Path:
    config = campaign_toml(
        **{"metric.command": "python bench.py", "guard": None, "metric.target": None}
    )
    return make_repo(
        tmp_path / "repo",
        {
            "calc.py": "N = 6.72\n",
            "bench.py": 'import calc\nprint(f"score: {abs(calc.N - 3)!r}")\n',
            "autoresearch.toml": config,
        },
    )


def test_show_step_and_status_print_no_float_noise(tmp_path: Path, invoke: Runner) -> None:
    repo = agent_repo(tmp_path)
    assert invoke(repo, "start").returncode == 0
    ws = repo / ".autoresearch" / "toy" / "worktree"
    (ws / "calc.py").write_text("N = 4.86\n")
    kept = json.loads(invoke(ws, "step", "--json").stdout)["attempt"]
    assert kept["status"] == "keep"
    raw = kept["delta"]
    assert repr(raw) == "-1.8599999999999994"  # the ledger's own number, kept in JSON

    shown = invoke(repo, "show", "1")
    assert not float_noise(shown.stdout)
    assert "delta: gain +1.86, delta -1.86" in shown.stdout
    assert json.loads(invoke(repo, "show", "1", "--json").stdout)["delta"] == raw

    status = invoke(repo, "status")
    assert not float_noise(status.stdout) and "gain +1.86" in status.stdout
    log = invoke(repo, "log")
    assert not float_noise(log.stdout) and "+1.86" in log.stdout and "-1.86" in log.stdout

    (ws / "calc.py").write_text("N = 7\n")  # worse: 4 against 1.86
    text = invoke(ws, "step")
    assert "gain -2.14, delta +2.14; against 1.86" in text.stdout
    assert not float_noise(text.stdout)
    (ws / "calc.py").write_text("N = 8\n")
    discard = json.loads(invoke(ws, "step", "--json").stdout)["attempt"]
    assert discard["status"] == "discard"
    # the incumbent's value it lost to, not null
    assert discard["previous_best"] == pytest.approx(1.86)
    assert git(repo, "rev-parse", "autoresearch/toy").strip() == kept["commit"]


def test_the_log_table_shows_the_digits_the_noise_supports() -> None:
    from rich.console import Console

    from autoresearch.attempt import AttemptRecord, Status
    from autoresearch.views.render import attempts_table

    record = AttemptRecord(
        1, Status.KEEP, metric=42.861234, delta=-1.8599999999999994, description="x"
    )
    console = Console(width=200, record=True)
    console.print(attempts_table([record], direction="minimize", noise=0.13))
    text = console.export_text()
    assert "42.86 " in text and "+1.86" in text and "-1.86" in text
    assert "42.8612" not in text
