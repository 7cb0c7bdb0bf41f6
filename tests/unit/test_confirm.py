"""`confirm`, `compare`, the machine log and the exclusive lock, on a real noisy campaign."""

from __future__ import annotations

import json
import math
import os
import random
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from autoresearch.config import DecisionConfig
from autoresearch.isolation import machine
from autoresearch.stats.paired import PairedGain, in_looks, paired_gain, pairs_asked, worth_more
from conftest import Runner, ledger
from unit.test_noise_campaigns import noisy_repo

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from paired_intervals import shapes


def test_paired_gain_holds_its_interval_through_one_spiked_pair() -> None:
    a = [10.0, 10.1, 9.9, 10.05, 10.0, 9.95, 10.1, 10.0, 9.9, 10.05]
    b = [x - 1.0 for x in a]
    b[3] += 30.0  # one pair ran beside a busy neighbour
    found = paired_gain(a, b, "minimize")
    assert found.confirmed and 0.8 < found.low <= found.estimate <= found.high < 1.2
    same = paired_gain(a, a, "minimize")
    assert not same.confirmed and same.estimate == 0
    worse = paired_gain(a, [x + 1 for x in a], "minimize")
    assert worse.high < 0 and not worse.confirmed


def two_looks(
    draw: Callable[[], float], gain: float, first: int = 10, most: int = 20
) -> tuple[PairedGain, PairedGain]:
    """One measurement as `confirm` takes it by default (`paired.in_looks`, the procedure
    `confirm` runs), beside its first look alone."""

    def take(count: int) -> tuple[list[float], list[float]]:
        return [0.0] * count, [-(gain + draw() - draw()) for _ in range(count)]

    a, b, found = in_looks((first, most), "minimize", take)
    return found, paired_gain(a[:first], b[:first], "minimize")


def test_a_second_look_keeps_the_level_it_states_and_confirms_more_real_gains() -> None:
    """10 pairs, then 10 more where the first 10 leave a gain open: on noise of five shapes
    the interval reported covers the true gain at least as often as the level it states
    (whichever look it stops at), a version no better is confirmed no more often than
    that level allows, and a gain of one noise unit is confirmed far more often than by
    the first 10 pairs alone."""
    paths = 1000
    for name, draw in shapes(random.Random(11)).items():
        level = None
        for gain in (0.0, 1.0):
            covered = confirmed = alone = 0
            for _ in range(paths):
                found, first = two_looks(draw, gain)
                level = found.level
                covered += found.low <= gain <= found.high
                confirmed += found.confirmed
                alone += first.confirmed
            assert level is not None and 0.95 <= level < 0.97
            assert covered / paths >= 0.95, (name, gain, covered)
            if gain == 0.0:
                assert confirmed / paths <= 0.035, (name, confirmed)
            else:
                assert confirmed >= alone + 0.1 * paths, (name, confirmed, alone)


def test_each_look_takes_its_share_of_the_level_and_says_what_the_two_cover() -> None:
    """10 pairs then up to 20 at 95%: each look at 97.5%, so at 10 pairs the second
    smallest to the second largest difference, at 20 the fifth (not the sixth, as 95% for
    one look of 20 would give); the level stated is what both looks miss together."""
    d = [float(x) for x in range(1, 21)]
    a = [0.0] * 20
    plan = (10, 20)
    first = paired_gain(a[:10], [-x for x in d[:10]], "minimize", plan=plan)
    assert (first.low, first.high) == (d[1], d[8])
    both = paired_gain(a, [-x for x in d], "minimize", plan=plan)
    assert (both.low, both.high) == (d[4], d[15])
    assert (paired_gain(a, [-x for x in d], "minimize").low) == d[5]
    miss = 2 * 11 / 2**10 + 2 * sum(math.comb(20, i) for i in range(5)) / 2**20
    assert first.level == both.level == pytest.approx(1 - miss) and 0.95 < first.level < 0.97
    with pytest.raises(ValueError, match="looks"):
        paired_gain(a[:7], a[:7], "minimize", plan=plan)


def test_a_spiked_pair_leaves_a_clear_gain_confirmed_at_the_first_look() -> None:
    a = [10.0, 10.1, 9.9, 10.05, 10.0, 9.95, 10.1, 10.0, 9.9, 10.05]
    b = [x - 1.0 for x in a]
    b[3] += 30.0
    first = paired_gain(a, b, "minimize", plan=(10, 20))
    assert first.confirmed and not worth_more(first)
    # Open, a gain: worth more; open, no gain: not; worse: not.
    open_gain = paired_gain(a, [x - (1.0 if i % 3 else -3.0) for i, x in enumerate(a)],
                            "minimize", plan=(10, 20))  # fmt: skip
    assert not open_gain.confirmed and open_gain.estimate > 0 and worth_more(open_gain)
    none = paired_gain(a, [x + (1.0 if i % 3 else -3.0) for i, x in enumerate(a)],
                       "minimize", plan=(10, 20))  # fmt: skip
    assert none.estimate < 0 and not worth_more(none)


def test_a_number_of_pairs_given_alone_is_exactly_that_many() -> None:
    """What `--repeat`/`--up-to`, the MCP tool's `repeat`/`up_to` and `[decision] confirm`
    /`confirm_up_to` ask, read one way."""
    assert pairs_asked(None, None) == (10, 20)
    assert pairs_asked(6, None) == (6, 6)
    assert pairs_asked(6, 9) == (6, 9)
    assert pairs_asked(None, 30) == (10, 30)
    assert pairs_asked(None, 4) == (4, 4)
    for repeat, up_to, words in (
        (6, 3, "fewer than"),
        (0, None, "between 1"),
        (None, 0, "between 1"),
    ):
        with pytest.raises(ValueError, match=words):
            pairs_asked(repeat, up_to)
    assert DecisionConfig().confirm_pairs() == (10, 20)
    assert DecisionConfig(confirm=6).confirm_pairs() == (6, 6)
    assert DecisionConfig(confirm=6, confirm_up_to=12).confirm_pairs() == (6, 12)
    assert DecisionConfig(confirm_up_to=15).confirm_pairs() == (10, 15)
    assert DecisionConfig(confirm=0, confirm_up_to=5).confirm_pairs() == (0, 0)
    # `confirm_up_to` alone below the default first look reads as `--up-to 5` alone.
    assert DecisionConfig(confirm_up_to=5).confirm_pairs() == (5, 5)


def test_an_interval_says_the_coverage_it_has_with_few_pairs() -> None:
    from autoresearch.measure.confirm import Outcome, Version, describe
    from autoresearch.stats.paired import pairs_for

    a, b = [130.0, 100.0, 131.0], [95.0, 96.0, 97.0]
    few = paired_gain(a, b, "minimize")
    assert few.level == 0.75  # [min, max] of 3 differences misses the median 1 time in 4
    assert pairs_for(0.95) == 6
    enough = paired_gain(a * 2, b * 2, "minimize")
    assert enough.level >= 0.95
    outcome = Outcome(Version("baseline", "a"), Version("best", "b"), a, b, few, "minimize",
                      raw_gain=10.0, raw_reference=125.0)  # fmt: skip
    data = outcome.to_json()
    # The raw gain is a share of the baseline's metric in the ledger, not of a spiked median
    # of this run's samples.
    assert data["raw_gain_pct"] == 8.0
    line = describe(data)
    assert "75.0% interval" in line and "--repeat 6" in line and "95% interval" not in line
    assert line.startswith("best [b] vs baseline [a] over 3 interleaved pairs: ")
    at_95 = Outcome(Version("baseline", "a" * 40), Version("best", "b" * 40), a * 4, b * 4,
                    paired_gain(a * 4, b * 4, "minimize"), "minimize")  # fmt: skip
    line = describe(at_95.to_json())
    assert line.startswith(f"best [{'b' * 10}] vs baseline [{'a' * 10}] over 12 ")
    assert "96.1% interval" in line and "--repeat" not in line


def test_an_auto_campaign_says_its_rule_verifies_and_confirms(
    tmp_path: Path, invoke: Runner
) -> None:
    repo, _ = noisy_repo(tmp_path, "auto", max_iterations=3)
    calc = (repo / "calc.py").read_text()
    result = invoke(repo, "run", "--plain")
    assert result.returncode == 0, result.stderr
    assert "decision: sequential, robust" in result.stdout
    records = ledger(repo, "n")
    assert len(records[0]["samples"]) == 4
    assert records[1]["status"] == "keep"
    # The campaign ended with the best confirmed against the baseline, both named.
    assert "interleaved pairs" in result.stdout and "confirmed" in result.stdout
    assert "(10 interleaved pairs, up to 20 where they leave a gain open)" in result.stdout
    assert_second_look_only_where_open(
        json.loads((repo / ".autoresearch" / "n" / "confirm.json").read_text()), (10, 20)
    )
    kept = [r for r in records if r["status"] == "keep"][-1]
    named = f"best [{kept['commit'][:10]}] vs baseline [{records[0]['commit'][:10]}] over"
    assert named in result.stdout, result.stdout
    assert re.search(r"interleaved pairs: gain .*, \d+\.\d% interval \[", result.stdout)
    assert invoke(repo, "verify").returncode == 0
    status = json.loads(invoke(repo, "status", "--json").stdout)
    assert status["decision"].startswith("decision: sequential, robust")
    assert status["noise_robust"] is not None and status["noise_robust"] > 0
    text = invoke(repo, "status").stdout
    assert "robust sigma" in text and "decision: sequential" in text
    found = invoke(repo, "confirm", "--repeat", "6", "--json")
    assert found.returncode == 0, found.stderr
    data = json.loads(found.stdout)
    assert data["a"]["label"] == "baseline" and data["b"]["label"] == "best"
    assert len(data["a_samples"]) == len(data["b_samples"]) == 6
    # N = 6 -> 5 under noise 0.3: a gain of about 1, the interval around it.
    assert data["low"] <= data["gain"] <= data["high"] and 0.3 < data["gain"] < 1.7
    assert data["raw_gain"] is not None
    # The text names both commits (in brackets, which must survive the markup).
    text = invoke(repo, "confirm", "--repeat", "6").stdout
    base, best = data["a"]["commit"][:10], data["b"]["commit"][:10]
    assert f"A baseline [{base}], B best [{best}]" in text, text
    report = invoke(repo, "report")
    assert report.returncode == 0
    assert "confirmed gain:" in (repo / ".autoresearch" / "n" / "report.md").read_text()
    # Measured in the engine's folders: the user's checkout is as it was.
    assert (repo / "calc.py").read_text() == calc
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=repo,
        capture_output=True,
        text=True,
    ).stdout
    assert dirty == ""
    # Every metric run left its line, with the load average beside the value.
    lines = machine.read(repo / ".autoresearch" / "n")
    runs = sum(int(r["metric_runs"]) for r in records)
    assert len(lines) >= runs and all("loadavg1" in line for line in lines)


# calc.py of a version 2 better than the baseline's N = 6 on two runs in three and 3 worse
# on the third, counted in a file of its own.
SWING = """\
import os
_n = int(open("{counter}").read()) if os.path.exists("{counter}") else 0
open("{counter}", "w").write(str(_n + 1))
N = 9 if _n % 3 == 2 else 4
"""


def assert_second_look_only_where_open(data: dict[str, object], plan: tuple[int, int]) -> None:
    """The pairs taken are the first look's, and the second's only where the first look's
    own samples leave a gain open; the interval is the one those samples give."""
    a, b = data["a_samples"], data["b_samples"]
    assert isinstance(a, list) and isinstance(b, list)
    first = paired_gain(a[: plan[0]], b[: plan[0]], "minimize", plan=plan)
    assert data["looks"] == ([plan[0], plan[1]] if worth_more(first) else [plan[0]])
    assert data["pairs"] == len(a) == len(b) == data["looks"][-1]  # type: ignore[index]
    assert data["up_to"] == plan[1]
    found = paired_gain(a, b, "minimize", plan=plan)
    assert (data["low"], data["high"], data["level"]) == (found.low, found.high, found.level)


def test_compare_names_versions_and_refuses_what_does_not_exist(
    tmp_path: Path, invoke: Runner
) -> None:
    repo, _ = noisy_repo(tmp_path, "auto", max_iterations=2)
    before = invoke(repo, "confirm")
    assert before.returncode != 0 and "no baseline yet" in before.stderr
    assert "Traceback" not in before.stderr
    assert invoke(repo, "run", "--plain").returncode == 0
    found = invoke(repo, "compare", "baseline", "1", "--repeat", "3", "--json")
    assert found.returncode == 0, found.stderr
    data = json.loads(found.stdout)
    assert data["b"]["label"] == "attempt 1" and data["gain"] > 0
    for spec in ("1", "2"):
        looked = invoke(
            repo, "compare", "baseline", spec, "--repeat", "3", "--up-to", "6", "--json"
        )
        assert looked.returncode == 0, looked.stderr
        assert_second_look_only_where_open(json.loads(looked.stdout), (3, 6))
    # A version 2 better on two runs in three and 3 worse on the third: its first 3 pairs
    # leave a gain open, so a second look is taken; the other way round the estimate is a
    # loss and none is; a number of pairs given alone is exactly that many.
    (repo / "calc.py").write_text(SWING.format(counter=tmp_path / "swing"))
    subprocess.run(["git", "commit", "-qam", "swing"], cwd=repo, check=True)
    swing = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()
    for a, b, repeat, looks in (
        ("baseline", swing, ["--repeat", "3", "--up-to", "6"], [3, 6]),
        (swing, "baseline", ["--repeat", "3", "--up-to", "6"], [3]),
        ("baseline", swing, ["--repeat", "3"], [3]),
    ):
        found = invoke(repo, "compare", a, b, *repeat, "--json")
        assert found.returncode == 0, found.stderr
        data = json.loads(found.stdout)
        assert data["looks"] == looks and data["pairs"] == looks[-1], data
        assert len(data["a_samples"]) == len(data["b_samples"]) == looks[-1]
        assert data["up_to"] == int(repeat[-1]) and not data["confirmed"]
        if len(looks) > 1:
            text = invoke(repo, "compare", a, b, *repeat).stdout
            assert "over 6 interleaved pairs (3 more where the first 3 left a gain open)" in text
    # Both looks ran in the engine's own folder: the checkout is the commit, byte for byte,
    # and no measurement folder is left behind.
    assert (repo / "calc.py").read_text() == SWING.format(counter=tmp_path / "swing")
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert status == ""
    assert not list((repo / ".autoresearch" / "n").glob("confirm-*"))
    fewer = invoke(repo, "compare", "baseline", "1", "--repeat", "6", "--up-to", "3")
    assert fewer.returncode == 2 and "--up-to 3 is fewer than --repeat 6" in fewer.stderr
    assert "Traceback" not in fewer.stderr
    missing = invoke(repo, "compare", "baseline", "99")
    assert missing.returncode != 0 and "attempt 99" in missing.stderr
    bogus = invoke(repo, "compare", "baseline", "no-such-thing")
    assert bogus.returncode != 0 and "neither" in bogus.stderr
    assert "Traceback" not in missing.stderr + bogus.stderr


def test_the_exclusive_lock_keeps_a_second_holder_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTORESEARCH_LOCK_DIR", str(tmp_path))
    order: list[str] = []
    inside = threading.Event()
    release = threading.Event()

    def first() -> None:
        with machine.exclusive(True):
            order.append("first in")
            inside.set()
            release.wait(30)
            order.append("first out")

    def second() -> None:
        with machine.exclusive(True):
            order.append("second in")

    one = threading.Thread(target=first)
    one.start()
    assert inside.wait(30)
    two = threading.Thread(target=second)
    two.start()
    two.join(0.5)
    assert order == ["first in"], "the second measurement ran while the first held the lock"
    release.set()
    one.join(30)
    two.join(30)
    assert order == ["first in", "first out", "second in"]
    with machine.exclusive(False):
        pass  # no lock taken when not asked for
    assert machine.lock_path().parent == tmp_path
    assert os.path.exists(machine.lock_path())
