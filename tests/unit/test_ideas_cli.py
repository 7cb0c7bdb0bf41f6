"""The ideas backlog, `run --hypotheses`, `autoresearch ideas` and `[[proposer]]` order, with
real (confined) proposer commands."""

from __future__ import annotations

import json
from pathlib import Path

import tomlkit

from campaigns import campaign_config, script_campaign
from conftest import Runner, git, ledger, statuses


def test_idea_lines_reach_the_backlog_and_the_next_prompt(tmp_path: Path, invoke: Runner) -> None:
    seen = tmp_path / "seen"
    seen.mkdir()
    repo = script_campaign(
        tmp_path,
        f'cp "$AUTORESEARCH_PROMPT_FILE" {seen}/prompt-$AUTORESEARCH_ITERATION.md\n'
        'sed -i "s/^N = .*/N = $((10 - AUTORESEARCH_ITERATION))/" calc.py\n'
        'echo "IDEA: cache the parsed input $AUTORESEARCH_ITERATION"\n'
        'echo "  - IDEA: cache the parsed input $AUTORESEARCH_ITERATION"\n'
        "echo lowered N\n",
        **{"stop.max_iterations": 2, "proposer.writable": [str(seen)]},
    )
    (repo / "autoresearch.ideas.md").write_text("- try a lookup table\n")
    result = invoke(repo, "run")
    assert result.returncode == 0, result.stderr
    backlog = (repo / "autoresearch.ideas.md").read_text()
    assert backlog.count("cache the parsed input 1") == 1  # collected once
    assert "- cache the parsed input 2 (attempt 2)" in backlog
    assert "try a lookup table" in (seen / "prompt-1.md").read_text()
    assert "cache the parsed input 1" in (seen / "prompt-2.md").read_text()
    assert "IDEA:" in (seen / "prompt-1.md").read_text()  # the proposer is told how
    # Only the backlog changed in the checkout: its HEAD and tracked files did not.
    assert git(repo, "status", "--porcelain").strip() == "?? autoresearch.ideas.md"
    listed = json.loads(invoke(repo, "ideas", "--json").stdout)
    assert [e["source"] for e in listed] == ["backlog"] * 3
    assert listed[0]["outcome"] == "pending"


def test_run_hypotheses_pops_one_per_attempt(tmp_path: Path, invoke: Runner) -> None:
    seen = tmp_path / "seen"
    seen.mkdir()
    repo = script_campaign(
        tmp_path,
        f'cp "$AUTORESEARCH_PROMPT_FILE" {seen}/prompt-$AUTORESEARCH_ITERATION.md\n'
        'sed -i "s/^N = .*/N = $((10 - AUTORESEARCH_ITERATION))/" calc.py\n',
        **{"stop.max_iterations": 2, "proposer.writable": [str(seen)]},
    )
    queue = tmp_path / "h.jsonl"
    queue.write_text(
        '{"hypothesis": "smaller N is better"}\n"N = 8 is best"\n{"hypothesis": "odd N"}\n'
    )
    result = invoke(repo, "run", "--hypotheses", str(queue))
    assert result.returncode == 0, result.stderr
    assert "3 new hypotheses queued" in result.stdout
    assert "smaller N is better" in (seen / "prompt-1.md").read_text()
    assert "N = 8 is best" in (seen / "prompt-2.md").read_text()
    assert [r.get("hypothesis") for r in ledger(repo, "t")[1:]] == [
        "smaller N is better",
        "N = 8 is best",
    ]
    listed = json.loads(invoke(repo, "ideas", "--json").stdout)
    assert [(e["text"], e["outcome"], e["iteration"]) for e in listed] == [
        ("smaller N is better", "keep", 1),
        ("N = 8 is best", "keep", 2),
        ("odd N", "pending", None),
    ]
    text = invoke(repo, "ideas").stdout
    assert "#1 keep" in text and "pending: odd N" in text
    # The same file again queues nothing twice; a markdown list adds to the queue.
    again = tmp_path / "more.md"
    again.write_text("# More\n\n- odd N\n- [ ] N below zero\n")
    result = invoke(repo, "run", "--hypotheses", str(again), "--max-iterations", "3")
    assert "1 new hypotheses queued" in result.stdout
    assert ledger(repo, "t")[-1]["hypothesis"] == "odd N"


def test_bad_hypothesis_files_are_one_sentence(tmp_path: Path, invoke: Runner) -> None:
    repo = script_campaign(tmp_path, "true\n")
    for name, text, words in [
        ("missing.md", None, "cannot be read"),
        ("empty.md", "# nothing listed\n", "holds no hypotheses"),
        ("bad.jsonl", '{"hypothesis": "a"}\n{not json\n', "line 2 is not JSON"),
        ("none.jsonl", '{"other": 1}\n', 'no "hypothesis" text'),
    ]:
        path = tmp_path / name
        if text is not None:
            path.write_text(text)
        result = invoke(repo, "run", "--hypotheses", str(path))
        assert result.returncode != 0, name
        assert words in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert not (repo / ".autoresearch" / "t" / "ledger.jsonl").exists()


def test_proposer_list_escalates_to_the_next_one_when_stuck(tmp_path: Path, invoke: Runner) -> None:
    cheap = tmp_path / "cheap.sh"
    cheap.write_text('echo "# cheap $AUTORESEARCH_ITERATION" >> calc.py\necho cheap try\n')
    strong = tmp_path / "strong.sh"
    strong.write_text(
        'sed -i "s/^N = .*/N = $((10 - AUTORESEARCH_ITERATION))/" calc.py\necho strong try\n'
    )
    repo = script_campaign(tmp_path, "true\n", **{"stop.max_iterations": 5})
    config = campaign_config(
        name="t",
        goal=None,
        guard=None,
        proposer=None,
        **{
            "metric.pattern": None,
            "metric.target": None,
            "stop.max_iterations": 5,
            "stop.escalate_after": 2,
        },
    )
    config["proposer"] = [
        {"kind": "command", "command": f"bash {cheap}", "timeout": 30},
        {"kind": "command", "command": f"bash {strong}", "timeout": 30},
    ]
    (repo / "autoresearch.toml").write_text(tomlkit.dumps(config))
    git(repo, "commit", "-qam", "two proposers")
    result = invoke(repo, "run")
    assert result.returncode == 0, result.stderr
    rows = ledger(repo, "t")[1:]
    # Two discards by the cheap one, then the strong one keeps; a keep goes back to cheap.
    assert [r["status"] for r in rows] == ["discard", "discard", "keep", "discard", "discard"]
    which = [str(r["description"]).split("]")[0] + "]" for r in rows]
    assert (
        which
        == ["[proposer 1, command]"] * 2 + ["[proposer 2, command]"] + ["[proposer 1, command]"] * 2
    )
    assert "cheap" in str(rows[0]["description"]) and "cheap" not in str(rows[2]["description"])
    assert "cheap" in str(rows[3]["description"])
    assert [r["strategy"] for r in rows] == ["refine", "refine", "pivot", "refine", "refine"]
    assert statuses(repo, "t")[0] == "baseline"


def test_an_idea_printed_last_is_not_the_description(tmp_path: Path, invoke: Runner) -> None:
    repo = script_campaign(
        tmp_path,
        'sed -i "s/^N = .*/N = 9/" calc.py\n'
        "echo lowered N to 9\n"
        'echo "IDEA: try a lookup table"\n'
        'echo "  - IDEA: cache the input"\n',
        **{"stop.max_iterations": 1},
    )
    result = invoke(repo, "run")
    assert result.returncode == 0, result.stderr
    assert ledger(repo, "t")[1]["description"] == "lowered N to 9"
    backlog = (repo / "autoresearch.ideas.md").read_text()
    assert "try a lookup table (attempt 1)" in backlog and "cache the input (attempt 1)" in backlog
