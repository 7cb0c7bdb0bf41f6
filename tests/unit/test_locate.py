"""Every campaign command finds its campaign from where agents and people stand: the
checkout, a folder below it, or the campaign's own workspace (which holds a `.git` of its
own); `--name` picks one of several campaigns; errors name the folder to run from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from campaigns import campaign_toml
from conftest import Runner, git, ledger, make_repo, snapshot


def two_campaign_repo(tmp_path: Path) -> Path:
    """Campaign 'toy' in autoresearch.toml and campaign 'other' in other.toml, both judged
    by `python bench.py` (the distance of N to 3)."""
    common = {"metric.command": "python bench.py", "guard": None, "proposer": None}
    return make_repo(
        tmp_path / "repo",
        {
            "calc.py": "# the number to tune\nN = 10\n",
            "src/keep.txt": "a folder below the top\n",
            "bench.py": 'import calc\nprint(f"score: {abs(calc.N - 3)}")\n',
            "autoresearch.toml": campaign_toml(**common),  # type: ignore[arg-type]
            "other.toml": campaign_toml(name="other", **common),  # type: ignore[arg-type]
        },
    )


def test_the_agent_loop_runs_inside_the_workspace(tmp_path: Path, invoke: Runner) -> None:
    repo = two_campaign_repo(tmp_path)
    before = snapshot(repo)
    assert invoke(repo, "start").returncode == 0
    ws = Path(invoke(repo, "workspace").stdout.strip())
    assert invoke(ws, "workspace").stdout.strip() == str(ws)
    assert invoke(ws / "src", "workspace").stdout.strip() == str(ws)

    (ws / "calc.py").write_text("N = 4\n")
    out = invoke(ws, "step", "-d", "N to 4", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["attempt"]["status"] == "keep"
    # `start` again from the workspace resumes the same campaign, never nests one
    again = invoke(ws, "start", "--json")
    assert again.returncode == 0, again.stderr
    assert not (ws / ".autoresearch").exists()
    assert [r["status"] for r in ledger(repo)] == ["baseline", "keep"]

    status = json.loads(invoke(ws / "src", "status", "--json").stdout)
    assert status["name"] == "toy" and status["best"] == 1
    assert "N to 4" in invoke(ws, "log").stdout
    assert invoke(ws, "verify").returncode == 0
    diff = invoke(ws, "diff")
    assert "+N = 4" in diff.stdout
    assert snapshot(repo) == before


def test_a_relative_config_inside_the_workspace_is_the_checkout_s(
    tmp_path: Path, invoke: Runner
) -> None:
    """The workspace holds the proposer's copy of other.toml; `--config other.toml` there
    means the checkout's file, which is the judge's."""
    repo = two_campaign_repo(tmp_path)
    assert invoke(repo, "start", "--config", "other.toml").returncode == 0
    ws = repo / ".autoresearch" / "other" / "worktree"
    original = (ws / "other.toml").read_text()
    (ws / "other.toml").write_text('name = "forged"\n')  # the proposer's copy, edited
    shown = invoke(ws, "workspace", "--config", "other.toml")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == str(ws)
    (ws / "other.toml").write_text(original)
    # and without --config, the folder itself says which campaign it is
    (ws / "calc.py").write_text("N = 2\n")
    stepped = json.loads(invoke(ws, "step", "--json").stdout)
    assert stepped["attempt"]["status"] == "keep"
    assert [r["status"] for r in ledger(repo, "other")] == ["baseline", "keep"]
    assert not (repo / ".autoresearch" / "toy").exists()


def test_name_picks_one_of_several_campaigns(tmp_path: Path, invoke: Runner) -> None:
    repo = two_campaign_repo(tmp_path)
    assert invoke(repo, "start").returncode == 0
    assert invoke(repo, "start", "--config", "other.toml").returncode == 0
    ws = repo / ".autoresearch" / "other" / "worktree"
    (ws / "calc.py").write_text("N = 5\n")
    assert invoke(repo, "step", "--name", "other").returncode == 0  # its config, by name

    for command in ("status", "log"):
        data = json.loads(invoke(repo / "src", command, "--name", "other", "--json").stdout)
        shown = data if command == "status" else {"name": "other", "best": data[-1]["metric"]}
        assert shown["name"] == "other" and shown["best"] == 2
    toy = json.loads(invoke(repo, "status", "--json").stdout)
    assert toy["name"] == "toy" and toy["best"] == 7
    assert "+N = 5" in invoke(repo, "diff", "1", "--name", "other").stdout
    assert (
        json.loads(invoke(repo, "show", "1", "--name", "other", "--json").stdout)["status"]
        == "keep"
    )
    assert invoke(repo, "report", "--name", "other").returncode == 0
    assert (repo / ".autoresearch" / "other" / "report.md").is_file()
    assert not (repo / ".autoresearch" / "toy" / "report.md").exists()
    branch = invoke(repo, "branch", "mine", "--name", "other", "--json")
    assert json.loads(branch.stdout)["iteration"] == 1
    assert git(repo, "rev-parse", "mine") == git(repo, "rev-parse", "autoresearch/other")

    # a campaign from inside another's workspace: --name wins over the folder
    assert json.loads(invoke(ws, "status", "--name", "toy", "--json").stdout)["name"] == "toy"

    wrong = invoke(repo, "status", "--name", "nope")
    assert wrong.returncode == 2 and "Traceback" not in wrong.stderr
    assert "no campaign 'nope'" in wrong.stderr and "other, toy" in wrong.stderr
    clash = invoke(repo, "status", "--name", "toy", "--config", "other.toml")
    assert clash.returncode == 2 and "campaign 'other', not 'toy'" in clash.stderr


def test_verify_with_config_re_derives_the_verdicts(tmp_path: Path, invoke: Runner) -> None:
    repo = two_campaign_repo(tmp_path)
    assert invoke(repo, "start", "--config", "other.toml").returncode == 0
    (repo / ".autoresearch" / "other" / "worktree" / "calc.py").write_text("N = 4\n")
    assert invoke(repo, "step", "--config", "other.toml").returncode == 0
    named = invoke(repo, "verify", "--name", "other", "--json")  # the config its run read
    assert named.returncode == 0 and json.loads(named.stdout)["rule"] == "strict"
    (repo / ".autoresearch" / "other" / "state.json").write_text("{}")  # no recorded config
    blind = invoke(repo, "verify", "--name", "other")
    assert blind.returncode == 0 and "NOT re-derived" in blind.stdout
    out = invoke(repo, "verify", "--config", "other.toml", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["rule"] == "strict"


def test_outside_a_repository_the_error_names_where_to_run(tmp_path: Path, invoke: Runner) -> None:
    (tmp_path / "elsewhere").mkdir()
    out = invoke(tmp_path / "elsewhere", "status")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "is not inside a git repository" in out.stderr
    assert "run autoresearch from your repository" in out.stderr


def test_before_start_the_step_names_the_checkout(tmp_path: Path, invoke: Runner) -> None:
    repo = two_campaign_repo(tmp_path)
    out = invoke(repo / "src", "step")
    assert out.returncode == 1 and f"autoresearch start` in {repo}" in out.stderr


def test_the_mcp_server_started_in_a_workspace_serves_its_campaign(
    tmp_path: Path, invoke: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An MCP client started by an agent in the workspace: the server's tools answer for
    the campaign of that workspace, from the user's checkout."""
    import anyio

    from autoresearch.agent import mcp_server

    repo = two_campaign_repo(tmp_path)
    assert invoke(repo, "start", "--config", "other.toml").returncode == 0
    ws = repo / ".autoresearch" / "other" / "worktree"
    served: list[mcp_server.MCPServer] = []
    monkeypatch.setattr(
        mcp_server,
        "serve",
        lambda root, config=None: served.append(mcp_server.make_server(root, config)),
    )
    assert invoke(ws / "src", "mcp").returncode == 0
    status = anyio.run(served[0].call_tool, "status", {}).structured_content
    assert status["campaign"] == "other" and status["baseline"] == 7


def test_a_folder_removed_under_the_shell_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run` makes the workspace afresh: an agent's shell left in the old one is told."""
    from click.testing import CliRunner

    from autoresearch.cli.commands import main

    gone = tmp_path / "worktree"
    gone.mkdir()
    monkeypatch.chdir(gone)
    monkeypatch.setenv("PWD", str(gone))
    gone.rmdir()
    out = CliRunner().invoke(main, ["status"])
    assert out.exit_code == 1
    assert f"{gone} no longer exists" in out.stderr and f"`cd {gone}` again" in out.stderr
