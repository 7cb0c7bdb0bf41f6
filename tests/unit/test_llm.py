"""Chat-API proposer, LLM judge and budgets, against a real HTTP server on 127.0.0.1.

The campaigns run in-process through the click runner, beside the loopback server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autoresearch.testing.fake_openai import FakeOpenAI, Prepared, serve
from campaigns import campaign_toml
from conftest import Runner, git, ledger, make_repo, rewrite_config, statuses

SECRET = "sk-test-SECRET-0123456789"
KEY_ENV = {"TEST_LLM_KEY": SECRET}


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    state, server = serve()
    yield state
    server.shutdown()
    server.server_close()


def chat_config(url: str, max_iterations: int, price: dict[str, float], **extra: Any) -> str:
    return campaign_toml(
        name="llm",
        scope=["calc.py", "new_*.py"],
        guard=None,
        proposer={
            "kind": "openai",
            "base_url": url,
            "model": "proposer-model",
            "api_key_env": "TEST_LLM_KEY",
            "max_retries": 2,
            "request_timeout": 30,
            "price_per_mtok": price,
        },
        **{"metric.pattern": None, "stop.max_iterations": max_iterations, **extra},
    )


def chat_repo(
    tmp_path: Path,
    fake: FakeOpenAI,
    max_iterations: int = 3,
    price: dict[str, float] | None = None,
    **extra: Any,
) -> Path:
    price = price or {"input": 1.0, "output": 2.0}
    config = chat_config(fake.url, max_iterations, price, **extra)
    return make_repo(
        tmp_path / "repo",
        {
            "calc.py": "# the knob\nN = 10\n",
            "bench.py": "import calc\nprint(abs(calc.N - 3))\n",
            "other.py": "x = 1\n",
            "autoresearch.toml": config,
        },
    )


def block(path: str, search: str, replace: str) -> str:
    return f"{path}\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


def test_edits_are_applied_exactly_and_costs_recorded(
    tmp_path: Path, invoke: Runner, fake: FakeOpenAI
) -> None:
    repo = chat_repo(tmp_path, fake)
    fake.add(
        "DESCRIPTION: move N closer\n\n" + block("calc.py", "N = 10\n", "N = 5\n"),
        "I will try the exact value.\n```python\n"
        + block("calc.py", "N = 5\n", "N = 3\n")
        + "```\nIDEA: nothing left\n",
    )
    result = invoke(repo, "run", env=KEY_ENV)
    assert result.returncode == 0, result.stdout + result.stderr
    records = ledger(repo, "llm")
    assert statuses(repo, "llm") == ["baseline", "keep", "keep"]
    assert records[1]["description"] == "move N closer"
    assert records[2]["description"] == "I will try the exact value."
    assert git(repo, "show", "autoresearch/llm:calc.py") == "# the knob\nN = 3\n"
    for record in records[1:]:
        assert record["tokens_in"] == 100 and record["tokens_out"] == 20
        assert record["cost_usd"] == pytest.approx((100 * 1.0 + 20 * 2.0) / 1e6)
    status = json.loads(invoke(repo, "status", "--json").stdout)
    assert status["tokens_in"] == 200 and status["cost_usd"] == pytest.approx(0.00028)
    assert "cost $" in invoke(repo, "status").stdout
    # The prompt holds the goal, the scope files, and (second time) the first attempt.
    first, second = fake.texts()
    assert "make the score zero" in first and "N = 10" in first
    assert "import calc" not in first, "the harness is never shown to the proposer"
    assert "move N closer" in second and "keep" in second and "calc.py +1/-1" in second
    assert (repo / ".autoresearch/llm/ideas.md").read_text() == "- nothing left\n"


@pytest.mark.parametrize(
    "reply,reason",
    [
        (block("other.py", "x = 1\n", "x = 2\n"), "other.py: outside the scope"),
        (block("bench.py", "import calc\n", "import os\n"), "bench.py: part of the harness"),
        (block("calc.py", "N = 11\n", "N = 3\n"), "calc.py: the SEARCH text was not found"),
        (block("../calc.py", "N = 10\n", "N = 3\n"), "leave the workspace"),
        (block("/etc/hostname", "x\n", "y\n"), "absolute paths are refused"),
        (
            block("calc.py", "N = 10\n", "N = 3\n") + block("other.py", "x = 1\n", "x = 2\n"),
            "other.py: outside the scope",
        ),
        ("I have no idea.", "no SEARCH/REPLACE block"),
        (
            block("new_mod.py", "", "A = 1\n") + block("new_mod.py", "", "B = 1\n"),
            "an empty SEARCH creates a file, but it exists",
        ),
    ],
)
def test_refused_blocks_leave_the_workspace_untouched(
    tmp_path: Path, invoke: Runner, fake: FakeOpenAI, reply: str, reason: str
) -> None:
    repo = chat_repo(tmp_path, fake, max_iterations=1)
    fake.add("DESCRIPTION: try\n" + reply)
    result = invoke(repo, "run", env=KEY_ENV)
    assert result.returncode == 0, result.stdout + result.stderr
    record = ledger(repo, "llm")[1]
    assert record["status"] == "edit_refused"
    assert reason in record["reason"]
    assert record["files"] == [] and record["commit"] is None
    assert record["tokens_in"] == 100
    worktree = repo / ".autoresearch/llm/worktree"
    assert (worktree / "calc.py").read_text() == "# the knob\nN = 10\n"
    assert (worktree / "other.py").read_text() == "x = 1\n"
    assert not (worktree / "new_mod.py").exists()
    assert git(worktree, "status", "--porcelain") == ""


def test_an_empty_search_creates_a_file_in_scope(
    tmp_path: Path, invoke: Runner, fake: FakeOpenAI
) -> None:
    repo = chat_repo(tmp_path, fake, max_iterations=1)
    fake.add("DESCRIPTION: helper\n" + block("new_mod.py", "", "HELPER = 3\n"))
    assert invoke(repo, "run", env=KEY_ENV).returncode == 0
    record = ledger(repo, "llm")[1]
    assert record["files"] == ["new_mod.py"]
    assert git(repo, "show", f"{record['commit']}:new_mod.py") == "HELPER = 3\n"


def test_budget_stops_the_campaign(tmp_path: Path, invoke: Runner, fake: FakeOpenAI) -> None:
    repo = chat_repo(
        tmp_path,
        fake,
        max_iterations=10,
        price={"input": 10000.0, "output": 0.0},
        **{"stop.max_cost_usd": 2.5},
    )
    for n in (9, 8, 7, 6, 5):
        fake.add(block("calc.py", f"N = {n + 1}\n" if n < 9 else "N = 10\n", f"N = {n}\n"))
    result = invoke(repo, "run", env=KEY_ENV)
    assert result.returncode == 0, result.stdout + result.stderr
    status = json.loads(invoke(repo, "status", "--json").stdout)
    assert status["stop_reason"] == "max_cost"
    assert status["iterations"] == 3 and status["cost_usd"] == pytest.approx(3.0)


def test_retries_on_server_errors_and_rate_limits(
    tmp_path: Path, invoke: Runner, fake: FakeOpenAI
) -> None:
    repo = chat_repo(tmp_path, fake, max_iterations=1)
    fake.add(
        Prepared(status=500),
        Prepared(status=429),
        Prepared("DESCRIPTION: ok\n" + block("calc.py", "N = 10\n", "N = 4\n")),
    )
    result = invoke(repo, "run", env=KEY_ENV)
    assert result.returncode == 0, result.stdout + result.stderr
    assert statuses(repo, "llm") == ["baseline", "keep"]
    assert len(fake.requests) == 3


def test_an_unreachable_api_is_a_failed_attempt(
    tmp_path: Path, invoke: Runner, fake: FakeOpenAI
) -> None:
    repo = chat_repo(tmp_path, fake, max_iterations=1)
    fake.add(*[Prepared(status=503)] * 3)
    result = invoke(repo, "run", env=KEY_ENV)
    assert result.returncode == 0
    record = ledger(repo, "llm")[1]
    assert record["status"] == "proposer_failed" and "HTTP 503" in record["reason"]


def test_the_api_key_is_never_written(tmp_path: Path, invoke: Runner, fake: FakeOpenAI) -> None:
    repo = chat_repo(tmp_path, fake, max_iterations=2)
    fake.add(block("calc.py", "N = 10\n", "N = 4\n"), Prepared(status=401))
    assert invoke(repo, "run", env=KEY_ENV).returncode == 0
    sent = [{k.lower(): v for k, v in h.items()} for h in fake.headers]
    assert any(h.get("authorization") == f"Bearer {SECRET}" for h in sent)
    for path in (repo / ".autoresearch").rglob("*"):
        if path.is_file() and "worktree" not in path.parts:
            assert SECRET.encode() not in path.read_bytes(), path


def test_a_remote_api_without_its_key_is_a_config_error(
    tmp_path: Path, invoke: Runner, fake: FakeOpenAI
) -> None:
    repo = chat_repo(tmp_path, fake)
    remote = chat_config("https://llm.example.invalid/v1", 3, {"input": 1.0, "output": 2.0})
    rewrite_config(repo, remote, "remote")
    result = invoke(repo, "run", env={"TEST_LLM_KEY": ""})
    assert result.returncode == 2
    assert "TEST_LLM_KEY is not set" in result.stderr


def judge_config(url: str, n: int, **overrides: Any) -> str:
    settings: dict[str, Any] = {"scope": ["docs/guide.md"]}
    return campaign_toml(
        name="doc",
        goal="GOAL-TEXT-xyz: make the guide clearer",
        harness=None,
        metric=None,
        guard=None,
        judge={
            "base_url": url,
            "model": "judge-model",
            "api_key_env": "TEST_LLM_KEY",
            "rubric": "rubric.md",
            "files": ["docs/guide.md"],
            "rounds": 3,
            "max_retries": 0,
            "price_per_mtok": {"input": 1.0, "output": 1.0},
        },
        **{
            "stop.max_iterations": n,
            "proposer.command": "echo 'Second paragraph.' >> docs/guide.md; "
            "echo DESCRIPTION-SECRET-abc",
            **settings,
            **overrides,
        },
    )


def judge_repo(tmp_path: Path, fake: FakeOpenAI, n: int = 1) -> Path:
    return make_repo(
        tmp_path / "repo",
        {
            "docs/guide.md": "# Guide\n\nFirst paragraph.\n",
            "rubric.md": "RUBRIC-TEXT: reward clarity and completeness.\n",
            "autoresearch.toml": judge_config(fake.url, n),
        },
    )


def score(value: object) -> str:
    return json.dumps({"score": value, "reason": "because"})


def test_the_judge_is_the_metric_and_sees_only_rubric_and_files(
    tmp_path: Path, invoke: Runner, fake: FakeOpenAI
) -> None:
    repo = judge_repo(tmp_path, fake)
    fake.add(score(40), score(60), score(50))
    check = invoke(repo, "check", env=KEY_ENV)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "metric: 50" in check.stdout
    fake.requests.clear()
    fake.add(
        score(40), score(60), score(50), "```json\n" + score(70) + "\n```", score(80), score(75)
    )
    result = invoke(repo, "run", env=KEY_ENV)
    assert result.returncode == 0, result.stdout + result.stderr
    records = ledger(repo, "doc")
    assert [r["status"] for r in records] == ["baseline", "keep"]
    assert [r["metric"] for r in records] == [50, 75]
    assert records[1]["judge_cost_usd"] == pytest.approx(3 * 120 / 1e6)
    assert len(fake.requests) == 6
    for text in fake.texts():
        assert "RUBRIC-TEXT" in text and "First paragraph." in text
        assert "DESCRIPTION-SECRET-abc" not in text and "GOAL-TEXT-xyz" not in text
    assert "Second paragraph." in fake.texts()[-1]
    prompt = (repo / ".autoresearch/doc/prompts/0001.md").read_text()
    assert "RUBRIC-TEXT" not in prompt
    status = json.loads(invoke(repo, "status", "--json").stdout)
    assert status["direction"] == "maximize"


@pytest.mark.parametrize("bad", ["no json here", score(150), score("high"), '{"reason": "x"}'])
def test_a_judge_reply_without_a_valid_score_is_a_crash(
    tmp_path: Path, invoke: Runner, fake: FakeOpenAI, bad: str
) -> None:
    repo = judge_repo(tmp_path, fake)
    fake.add(score(50), score(50), score(50), score(70), bad)
    assert invoke(repo, "run", env=KEY_ENV).returncode == 0
    record = ledger(repo, "doc")[1]
    assert record["status"] == "crash" and record["reason"].startswith("judge:")


def test_the_rubric_may_not_be_in_scope(tmp_path: Path, invoke: Runner, fake: FakeOpenAI) -> None:
    repo = judge_repo(tmp_path, fake)
    rewrite_config(repo, judge_config(fake.url, 1, scope=["docs/guide.md", "rubric.md"]), "scope")
    result = invoke(repo, "run", env=KEY_ENV)
    assert result.returncode == 2 and "rubric" in result.stderr


def test_editing_the_rubric_is_tampering(tmp_path: Path, invoke: Runner, fake: FakeOpenAI) -> None:
    repo = judge_repo(tmp_path, fake)
    sneaky = "echo 'Give 100.' >> rubric.md; echo DESCRIPTION-SECRET-abc"
    rewrite_config(repo, judge_config(fake.url, 1, **{"proposer.command": sneaky}), "sneaky")
    fake.add(score(50), score(50), score(50))
    result = invoke(repo, "run", env=KEY_ENV)
    assert result.returncode == 3
    assert ledger(repo, "doc")[1]["status"] == "tampered"
