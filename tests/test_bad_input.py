"""Bad input gets one clear sentence and exit code 2 (config) or 1 (environment)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import Runner, git, make_repo

GOOD = {
    "name": '"t"',
    "scope": '["calc.py"]',
    "metric": {"command": '"python bench.py"', "direction": '"minimize"'},
    "proposer": {"command": '"true"'},
}


def render(data: dict[str, object]) -> str:
    top = [f"{k} = {v}" for k, v in data.items() if not isinstance(v, dict)]
    tables = [
        f"[{k}]\n" + "\n".join(f"{kk} = {vv}" for kk, vv in v.items())
        for k, v in data.items()
        if isinstance(v, dict)
    ]
    return "\n".join(top) + "\n\n" + "\n\n".join(tables) + "\n"


def with_changes(**changes: object) -> str:
    data: dict[str, object] = {k: dict(v) if isinstance(v, dict) else v for k, v in GOOD.items()}
    for key, value in changes.items():
        section, _, field = key.partition("__")
        if field:
            table = data.setdefault(section, {})
            assert isinstance(table, dict)
            if value is None:
                table.pop(field, None)
            else:
                table[field] = value
        elif value is None:
            data.pop(section, None)
        else:
            data[section] = value
    return render(data)


CASES = [
    (with_changes(metric__direction='"down"'), "metric.direction"),
    (with_changes(metric__command=None), "metric.command"),
    (with_changes(metric__timeout="-1"), "metric.timeout"),
    (with_changes(metric__pattern="'score: [0-9]+'"), "metric.pattern"),
    (with_changes(metric__pattern="'(unclosed'"), "metric.pattern"),
    (with_changes(scope="[]"), "scope"),
    (with_changes(scope='["../x"]'), "scope"),
    (with_changes(name='"bad name!"'), "name"),
    (with_changes(name=None), "name"),
    (with_changes(proposer__kind='"telepathy"'), "proposer.kind"),
    (with_changes(proposer__command=None), "proposer.command"),
    (with_changes(proposer__timeout="-5"), "proposer.timeout"),
    (with_changes(stop={"max_iterations": "-1"}), "stop.max_iterations"),
    (with_changes(stop={"plateau": '"x"'}), "stop.plateau"),
    (with_changes(surprise='"x"'), "surprise"),
    (with_changes(harness='["calc.py"]'), "both in scope and in harness"),
    (with_changes(instructions='"missing.md"'), "instructions"),
    ("name = [\n", "not valid TOML"),
]


@pytest.mark.parametrize("text,needle", CASES)
def test_bad_config_is_one_sentence_exit_2(
    tmp_path: Path, cli: Runner, text: str, needle: str
) -> None:
    repo = make_repo(
        tmp_path / "r", {"calc.py": "N = 1\n", "bench.py": "print(1)\n", "autoresearch.toml": text}
    )
    for command in ("run", "check"):
        result = cli(repo, command)
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr
        assert needle in result.stderr
        assert "autoresearch.toml" in result.stderr or "TOML" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_harness_pattern_that_matches_nothing(tmp_path: Path, cli: Runner) -> None:
    repo = make_repo(
        tmp_path / "r",
        {
            "calc.py": "N = 1\n",
            "bench.py": "print(1)\n",
            "autoresearch.toml": with_changes(harness='["nope.py"]'),
        },
    )
    result = cli(repo, "run")
    assert result.returncode == 2
    assert "'nope.py' matches no file" in result.stderr


def test_glob_overlap_of_scope_and_harness(tmp_path: Path, cli: Runner) -> None:
    repo = make_repo(
        tmp_path / "r",
        {
            "calc.py": "N = 1\n",
            "bench.py": "print(1)\n",
            "autoresearch.toml": with_changes(scope='["*.py"]', harness='["bench.py"]'),
        },
    )
    result = cli(repo, "run")
    assert result.returncode == 2
    assert "bench.py is both in scope and in harness" in result.stderr


def test_no_config(tmp_path: Path, cli: Runner) -> None:
    repo = make_repo(tmp_path / "r", {"calc.py": "N = 1\n"})
    result = cli(repo, "run")
    assert result.returncode == 2
    assert "autoresearch init" in result.stderr


def test_missing_explicit_config(tmp_path: Path, cli: Runner) -> None:
    repo = make_repo(tmp_path / "r", {"calc.py": "N = 1\n"})
    result = cli(repo, "run", "--config", "nope.toml")
    assert result.returncode == 2
    assert "nope.toml" in result.stderr


def test_not_a_repository(tmp_path: Path, cli: Runner) -> None:
    (tmp_path / "plain").mkdir()
    result = cli(tmp_path / "plain", "run")
    assert result.returncode == 1
    assert "not inside a git repository" in result.stderr
    assert "Traceback" not in result.stderr


def test_repository_without_commits(tmp_path: Path, cli: Runner) -> None:
    repo = make_repo(
        tmp_path / "r",
        {"calc.py": "N = 1\n", "bench.py": "print(1)\n", "autoresearch.toml": render(GOOD)},
        commit=False,
    )
    result = cli(repo, "run")
    assert result.returncode == 1
    assert "no commits yet" in result.stderr


def test_bad_usage_exits_2(tmp_path: Path, cli: Runner) -> None:
    result = cli(tmp_path, "run", "--max-iterations", "-3")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_existing_branch_without_ledger(tmp_path: Path, cli: Runner) -> None:
    repo = make_repo(
        tmp_path / "r",
        {"calc.py": "N = 1\n", "bench.py": "print(1)\n", "autoresearch.toml": render(GOOD)},
    )
    (repo / "calc.py").write_text("N = 2\n")
    git(repo, "commit", "-qam", "second")
    git(repo, "branch", "autoresearch/t", "HEAD~1")
    result = cli(repo, "run")
    assert result.returncode == 2
    assert "git branch -D autoresearch/t" in result.stderr


def test_checkout_on_the_campaign_branch(tmp_path: Path, cli: Runner) -> None:
    repo = make_repo(
        tmp_path / "r",
        {"calc.py": "N = 1\n", "bench.py": "print(1)\n", "autoresearch.toml": render(GOOD)},
    )
    git(repo, "checkout", "-q", "-b", "autoresearch/t")
    result = cli(repo, "run")
    assert result.returncode == 1
    assert "switch to another branch" in result.stderr


def test_status_before_any_run(tmp_path: Path, cli: Runner) -> None:
    repo = make_repo(tmp_path / "r", {"calc.py": "N = 1\n", "autoresearch.toml": render(GOOD)})
    result = cli(repo, "status")
    assert result.returncode == 1
    assert "has no measurements yet" in result.stderr
