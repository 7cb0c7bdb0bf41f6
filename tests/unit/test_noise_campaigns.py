"""Noise-aware rules in the engine: samples, interleaving, ledger fields, metric sources."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import Runner, ledger, make_repo

NOISY_BENCH = """\
import json, os, random
import calc
state = os.environ["NOISE_STATE"]
count = int(open(state).read()) if os.path.exists(state) else 0
open(state, "w").write(str(count + 1))
with open(os.environ["NOISE_ORDER"], "a") as f:
    f.write(f"{os.environ['AUTORESEARCH_ITERATION']} {calc.N}\\n")
print(calc.N + random.Random(count).gauss(0, 0.3))
"""

CONFIG = """\
name = "n"
scope = ["calc.py"]
harness = ["bench.py"]

[metric]
command = "NOISE_STATE={state} NOISE_ORDER={order} python bench.py"
direction = "minimize"

[decision]
rule = "{rule}"
repeats = 3
max_samples = 6

[stop]
max_iterations = {max_iterations}

[sandbox]
writable = ["{outside}"]

[proposer]
kind = "command"
command = "bash {proposer}"
"""

# Attempt 1 is a clear gain, 2 is neutral (a comment), 3 is clearly worse, 4 a small gain.
PROPOSER = r"""
case "$AUTORESEARCH_ITERATION" in
  1) sed -i 's/^N = .*/N = 5/' calc.py;;
  2) echo "# neutral $AUTORESEARCH_ITERATION" >> calc.py;;
  3) sed -i 's/^N = .*/N = 9/' calc.py;;
  *) sed -i "s/^N = .*/N = 4.8/" calc.py;;
esac
"""


def noisy_repo(tmp_path: Path, rule: str, max_iterations: int = 4) -> tuple[Path, Path]:
    proposer = tmp_path / "p.sh"
    proposer.write_text(PROPOSER)
    order = tmp_path / "order.txt"
    repo = make_repo(
        tmp_path / "repo",
        {
            "calc.py": "N = 6\n",
            "bench.py": NOISY_BENCH,
            "autoresearch.toml": CONFIG.format(
                state=tmp_path / "state",
                order=order,
                rule=rule,
                proposer=proposer,
                max_iterations=max_iterations,
                outside=tmp_path,
            ),
        },
    )
    return repo, order


def test_sequential_interleaves_candidate_and_incumbent(tmp_path: Path, invoke: Runner) -> None:
    repo, order = noisy_repo(tmp_path, "sequential")
    result = invoke(repo, "run")
    assert result.returncode == 0, result.stderr
    records = ledger(repo, "n")
    assert len(records[0]["samples"]) == 4 and records[0]["metric_runs"] == 4
    assert [r["status"] for r in records][:4] == ["baseline", "keep", "discard", "discard"]
    runs = [line.split() for line in order.read_text().splitlines()]
    for record in records[1:]:
        it = str(record["iteration"])
        seen = [float(n) for i, n in runs if i == it]
        assert len(seen) == record["metric_runs"]
        assert len(record["samples"]) + len(record.get("incumbent_samples", [])) == len(seen)
        assert record["metric"] == pytest.approx(sum(record["samples"]) / len(record["samples"]))
        # The sides take turns in blocks A B B A; each side is one version of the code.
        first = [n for k, n in enumerate(seen) if k % 4 in (0, 3)]
        second = [n for k, n in enumerate(seen) if k % 4 in (1, 2)]
        assert len(set(first)) == 1
        if record.get("incumbent_samples"):
            assert len(set(second)) == 1
    # A clear gain is kept within a block of four runs, after fresh samples of the incumbent.
    first = [float(n) for i, n in runs if i == "1"]
    assert first[:2] == [5.0, 6.0] and len(first) <= 4
    keep = records[1]
    assert keep["incumbent_samples"], "a keep needs a fresh sample of the incumbent"
    worse = records[3]
    # Far worse than the noise shows: dropped by its second run, the last of a block A B B A.
    assert worse["metric_runs"] <= 4, "a clearly worse candidate is dropped by its second run"
    status = json.loads(invoke(repo, "status", "--json").stdout)
    assert status["noise"] is not None and 0.05 < status["noise"] < 1.0
    assert status["confidence"] is not None and status["confidence"] > 0.99
    text = invoke(repo, "status").stdout
    assert "noise: sigma" in text and "confidence" in text


def test_repeats_measures_everything_n_times(tmp_path: Path, invoke: Runner) -> None:
    repo, _ = noisy_repo(tmp_path, "repeats", max_iterations=3)
    assert invoke(repo, "run").returncode == 0
    records = ledger(repo, "n")
    assert [len(r["samples"]) for r in records] == [3, 3, 3, 3]
    assert [r["metric_runs"] for r in records] == [3, 3, 3, 3]
    assert [r["status"] for r in records] == ["baseline", "keep", "discard", "discard"]


def test_sequential_resumes_with_its_noise_history(tmp_path: Path, invoke: Runner) -> None:
    repo, _ = noisy_repo(tmp_path, "sequential", max_iterations=2)
    assert invoke(repo, "run").returncode == 0
    assert invoke(repo, "run", "--max-iterations", "4").returncode == 0
    records = ledger(repo, "n")
    assert [r["iteration"] for r in records] == [0, 1, 2, 3, 4]
    assert records[3]["status"] == "discard"


def test_strict_status_has_no_noise(toy: Path, invoke: Runner) -> None:
    assert invoke(toy, "run", "--max-iterations", "1").returncode == 0
    status = json.loads(invoke(toy, "status", "--json").stdout)
    assert status["noise"] is None and status["confidence"] is None


SOURCE_CONFIG = """\
name = "m"
scope = ["calc.py"]

[metric]
command = "python bench.py"
direction = "minimize"
{metric}

[stop]
max_iterations = 1

[proposer]
kind = "command"
command = "sed -i 's/^N = .*/N = 2/' calc.py"
"""


@pytest.mark.parametrize(
    "metric,bench",
    [
        (
            'file = "out/metrics.json"\nkey = "val.loss"',
            "import calc, json, os\nos.makedirs('out', exist_ok=True)\n"
            "json.dump({'val': {'loss': calc.N}, 'n': 99}, open('out/metrics.json', 'w'))\n"
            "print('last number 1234')\n",
        ),
        (
            'file = "m.yaml"\nkey = "history.-1.loss"',
            "import calc\nopen('m.yaml', 'w').write("
            "f'history:\\n  - loss: 50\\n  - loss: {calc.N}\\n')\n",
        ),
        (
            'file = "m.toml"\nkey = "eval.loss"',
            "import calc\nopen('m.toml', 'w').write(f'[eval]\\nloss = {calc.N}\\n')\n",
        ),
        ('file = "m.txt"', "import calc\nopen('m.txt', 'w').write(f'epoch 9 loss {calc.N}\\n')\n"),
        (
            'name = "loss"',
            "import calc\nprint(f'METRIC loss={calc.N}')\nprint('METRIC acc=0.5')\n"
            "print('done 77')\n",
        ),
    ],
)
def test_metric_sources(tmp_path: Path, invoke: Runner, metric: str, bench: str) -> None:
    repo = make_repo(
        tmp_path / "r",
        {
            "calc.py": "N = 5\n",
            "bench.py": bench,
            "autoresearch.toml": SOURCE_CONFIG.format(metric=metric),
        },
    )
    result = invoke(repo, "run")
    assert result.returncode == 0, result.stdout + result.stderr
    assert [r["metric"] for r in ledger(repo, "m")] == [5, 2]
    # The metric's output file never counts as a change, nor leaks into the next run.
    assert ledger(repo, "m")[1]["files"] == ["calc.py"]


@pytest.mark.parametrize(
    "metric,bench,reason",
    [
        ('file = "none.json"\nkey = "x"', "print(1)\n", "did not write none.json"),
        (
            'file = "m.json"\nkey = "val.nope"',
            "open('m.json','w').write('{\"val\": {}}')\n",
            "has no key 'val.nope'",
        ),
        (
            'file = "m.json"\nkey = "v"',
            "open('m.json','w').write('{\"v\": \"x\"}')\n",
            "not a number",
        ),
        ('file = "m.json"\nkey = "v"', "open('m.json','w').write('{broken')\n", "cannot be parsed"),
        ('name = "loss"', "print('METRIC acc=1')\n", "no 'METRIC loss=...' line (it printed: acc)"),
    ],
)
def test_metric_source_failures_name_the_problem(
    tmp_path: Path, invoke: Runner, metric: str, bench: str, reason: str
) -> None:
    repo = make_repo(
        tmp_path / "r",
        {
            "calc.py": "N = 5\n",
            "bench.py": bench,
            "autoresearch.toml": SOURCE_CONFIG.format(metric=metric),
        },
    )
    result = invoke(repo, "check")
    assert result.returncode == 1
    assert reason in result.stdout, result.stdout


@pytest.mark.parametrize(
    "metric,needle",
    [
        ('key = "x"', "set 'file' too"),
        ('name = "loss"\npattern = "(x)"', "drop 'file' or 'pattern'"),
        ('file = "../x.json"', "inside the workspace"),
    ],
)
def test_metric_source_config_errors(
    tmp_path: Path, invoke: Runner, metric: str, needle: str
) -> None:
    repo = make_repo(
        tmp_path / "r",
        {
            "calc.py": "N = 5\n",
            "bench.py": "print(1)\n",
            "autoresearch.toml": SOURCE_CONFIG.format(metric=metric),
        },
    )
    result = invoke(repo, "run")
    assert result.returncode == 2 and needle in result.stderr


def test_decision_config_errors(tmp_path: Path, invoke: Runner) -> None:
    for bad, needle in (
        ('rule = "vibes"', "decision.rule"),
        ("confidence = 1.5", "confidence"),
        ("max_samples = 1", "max_samples"),
        ('min_delta = "-1%"', "min_delta"),
        ('min_delta = "lots"', "min_delta"),
    ):
        text = SOURCE_CONFIG.format(metric="") + f"\n[decision]\n{bad}\n"
        repo = make_repo(
            tmp_path / bad.split()[0],
            {"calc.py": "N = 5\n", "bench.py": "print(1)\n", "autoresearch.toml": text},
        )
        result = invoke(repo, "run")
        assert result.returncode == 2 and needle in result.stderr, (bad, result.stderr)


def test_resumed_evaluator_knows_what_the_reference_carries() -> None:
    """On resume the evaluator rebuilds which incumbent samples are re-measurements (the
    reference a candidate inherits) from the ledger alone."""
    from autoresearch.attempt import AttemptRecord
    from autoresearch.config import DecisionConfig
    from autoresearch.stats.sample_book import SampleBook

    ledger = [
        {"iteration": 0, "status": "baseline", "commit": "b", "samples": [1, 2, 3, 4]},
        {"iteration": 1, "status": "discard", "commit": "c1", "parent": "b", "samples": [5]},
        {
            "iteration": 2,
            "status": "discard",
            "commit": "c2",
            "parent": "b",
            "samples": [5, 6],
            "incumbent_samples": [1.5],
        },
        {
            "iteration": 3,
            "status": "keep",
            "commit": "c3",
            "parent": "b",
            "samples": [0.1, 0.2],
            "incumbent_samples": [1.1],
        },
    ]
    records = [AttemptRecord.from_json(r) for r in ledger]
    evaluator = SampleBook(DecisionConfig(rule="sequential", max_samples=4).to_rule(), "minimize")
    evaluator.load(records[:3])
    # The baseline's own samples are a fresh reference, not one left behind by candidates.
    assert evaluator.reference("b") == [2, 3, 4, 1.5] and evaluator.carried("b") == 1
    evaluator.load(records)
    # A newly kept incumbent: its own samples selected it, nothing is carried. Of the
    # baseline's, the one taken more than 2 x max_samples runs ago is stale.
    assert evaluator.reference("c3") == [] and evaluator.reference("b") == [4, 1.5, 1.1]
    assert evaluator.carried("c3") == 0
