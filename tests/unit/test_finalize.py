"""`finalize` splits the kept changes into branches from the campaign's base: one per
change, or per group that must stay together; each applies on the base and holds exactly
its changes, with its measured effect in the commit message; the user's checkout and
other branches are not touched."""

from __future__ import annotations

import json
from pathlib import Path

from campaigns import script_campaign
from conftest import Runner, git, ledger, snapshot

# 1 and 3 change the same line of a.py (3 builds on 1); 2 changes b.py; 4 is worse.
SCRIPT = """case "$AUTORESEARCH_ITERATION" in
  1) sed -i "s/^A = .*/A = 8/" a.py; echo "lower A to 8";;
  2) sed -i "s/^B = .*/B = 7/" b.py; echo "lower B to 7";;
  3) sed -i "s/^A = 8/A = 5/" a.py; echo "lower A again";;
  *) sed -i "s/^B = .*/B = 30/" b.py; echo "raise B";;
esac
"""
FILES = {
    "a.py": "# first\nA = 10\n",
    "b.py": "# second\nB = 10\n",
    "notes.txt": "the user's\n",
}


def campaign(tmp_path: Path) -> Path:
    return script_campaign(
        tmp_path,
        SCRIPT,
        bench="import a, b\nprint(a.A + b.B)\n",
        files=FILES,
        scope=["a.py", "b.py"],
        **{"stop.max_iterations": 4},
    )


def changed(repo: Path, base: str, branch: str) -> dict[str, str]:
    names = git(repo, "diff", "--name-only", base, branch).split()
    return {n: git(repo, "show", f"{branch}:{n}") for n in names}


def test_each_branch_holds_exactly_its_changes(tmp_path: Path, invoke: Runner) -> None:
    repo = campaign(tmp_path)
    assert invoke(repo, "run", "--plain").returncode == 0
    assert [r["status"] for r in ledger(repo, "t")] == [
        "baseline",
        "keep",
        "keep",
        "keep",
        "discard",
    ]
    base = str(ledger(repo, "t")[0]["commit"])
    before = snapshot(repo)
    others = git(repo, "for-each-ref", "--format=%(refname) %(objectname)")

    out = invoke(repo, "finalize", "--json")
    assert out.returncode == 0, out.stderr
    pieces = json.loads(out.stdout)
    assert [p["attempts"] for p in pieces] == [[1, 3], [2]]
    assert [p["branch"] for p in pieces] == [
        "autoresearch-finalize/t/1-lower-a-to-8",
        "autoresearch-finalize/t/2-lower-b-to-7",
    ]
    together, alone = pieces
    assert "attempt 3 does not apply without #1" in together["together"]
    assert alone["together"] is None
    assert [e["gain"] for e in together["effects"]] == [2, 3]

    for piece in pieces:  # each starts at the base and applies there
        branch = piece["branch"]
        assert git(repo, "rev-parse", f"{branch}^").strip() == base
    assert changed(repo, base, together["branch"]) == {"a.py": "# first\nA = 5\n"}
    assert changed(repo, base, alone["branch"]) == {"b.py": "# second\nB = 7\n"}
    # merged together, the pieces are the campaign's best, no more, no less
    merged = git(repo, "merge-tree", "--write-tree", together["branch"], alone["branch"])
    best_tree = git(repo, "rev-parse", "autoresearch/t^{tree}").strip()
    assert merged.split()[0] == best_tree

    text = git(repo, "log", "-1", "--format=%B", alone["branch"])
    assert text.startswith("lower B to 7\n")
    assert "attempt 2 (keep): metric 18 -> 15 (gain +3, delta -3, minimize)" in text
    text = git(repo, "log", "-1", "--format=%B", together["branch"])
    assert "Kept together: attempt 3 does not apply without #1" in text

    # The checkout and every other ref are as they were.
    assert snapshot(repo) == before
    after = git(repo, "for-each-ref", "--format=%(refname) %(objectname)")
    assert [line for line in after.splitlines() if "autoresearch-finalize/" not in line] == (
        others.splitlines()
    )

    again = invoke(repo, "finalize")
    assert again.returncode == 2 and "--force" in again.stderr
    forced = invoke(repo, "finalize", "--force")
    assert forced.returncode == 0 and "autoresearch-finalize/t/2-lower-b-to-7" in forced.stdout


ENTANGLING = """case "$AUTORESEARCH_ITERATION" in
  1) sed -i "s/^A = .*/A = 8/" a.py; echo "lower A to 8";;
  2) sed -i "s/^B = .*/B = 7/" b.py; echo "lower B to 7";;
  3) sed -i "s/^# second/# 2nd/" b.py; echo "rename the comment";;
  *) sed -i "s/^B = .*/B = 6/" b.py; echo "lower B to 6";;
esac
"""
BONUS = "import a, b\nprint(a.A + b.B - open('b.py').read().startswith('# 2nd'))\n"


def test_the_ablation_keeps_an_entangled_change_with_what_builds_on_it(
    tmp_path: Path, invoke: Runner
) -> None:
    """Attempt 3 applies on the base alone, but the ablation found attempt 2 (on the same
    file) cannot be taken out alone: they share a branch."""
    files = {**FILES, "b.py": "# second\n\n\n\n\n\nB = 10\n"}
    repo = script_campaign(
        tmp_path,
        ENTANGLING,
        bench=BONUS,
        files=files,
        scope=["a.py", "b.py"],
        **{"stop.max_iterations": 4},
    )
    assert invoke(repo, "run", "--plain").returncode == 0
    records = ledger(repo, "t")
    assert [r["iteration"] for r in records if r["status"] == "keep"] == [1, 2, 3, 4]
    plain = json.loads(invoke(repo, "finalize", "--json").stdout)
    assert [p["attempts"] for p in plain] == [[1], [2, 4], [3]]  # without the ablation
    found = {"iteration": 2, "verdict": "entangled", "reason": "later changes build on it"}
    ablation = {"best": records[-1]["commit"], "changes": [found]}
    (repo / ".autoresearch" / "t" / "ablation.json").write_text(json.dumps(ablation))
    pieces = json.loads(invoke(repo, "finalize", "--json", "--force").stdout)
    assert [p["attempts"] for p in pieces] == [[1], [2, 3, 4]]
    assert "the ablation could not take #2 out alone, and attempt 3" in pieces[1]["together"]
    text = git(repo, "log", "-1", "--format=%B", pieces[1]["branch"])
    assert "ablation: entangled: later changes build on it" in text


def test_nothing_kept_is_said_in_one_sentence(tmp_path: Path, invoke: Runner) -> None:
    repo = script_campaign(tmp_path, 'sed -i "s/^N = .*/N = 99/" calc.py\n')
    invoke(repo, "run", "--plain")
    out = invoke(repo, "finalize")
    assert out.returncode == 1 and "nothing to finalize" in out.stderr
    assert "Traceback" not in out.stderr
