"""A change that makes its runs vary more, once kept, is the incumbent every later
comparison meets, and so are the changes made on top of it: their runs vary as much, so
neither side varies more than the other (`decide.varies_more`). The campaign's noise is
pooled over every version, the quieter ones before it too, so until the noisier versions
outweigh them it reads too small and chance gains look real. A known limit
(docs/sequential.md, "A noisier kept version, read three ways: measured, not adopted"):
the test below holds the promise it breaks, and passes once the judge keeps it."""

from __future__ import annotations

import random

import pytest

from autoresearch.stats.decide import Comparison, Pool, Rule, Side, Verdict

# What `noise = "auto"` judges with on symmetric noise where a later first keep pays: the
# clipped mean, the pairs asked too, no keep before the candidate's third run.
RULE = Rule("sequential", estimator="robust", pairs="both", first_keep=3)
COMPARISONS = 1000


def compare(seed: int, times: float, known: int) -> Comparison:
    """One null comparison (the candidate no better) against an incumbent kept on two runs
    and re-measured `known` times since, in a pool of ten quieter versions (sigma 1 at
    level 100, six runs each); the incumbent's and the candidate's runs vary `times` as
    much."""
    rng = random.Random(seed)
    quiet = tuple(tuple(100 + rng.gauss(0.0, 1.0) for _ in range(6)) for _ in range(10))
    prior = [100 + rng.gauss(0.0, times) for _ in range(2)]
    since = [100 + rng.gauss(0.0, times) for _ in range(known)]
    pool = Pool((*quiet, (*prior, *since)), incumbent=len(quiet), estimator="robust")
    test = Comparison(RULE, "minimize", since, pool, known, prior=prior)
    while isinstance(test.next(), Side):
        test.add(100 + rng.gauss(0.0, times))
    return test


def kept(times: float, known: int) -> int:
    return sum(compare(seed, times, known).verdict is Verdict.KEEP for seed in range(COMPARISONS))


@pytest.mark.xfail(
    strict=True,
    reason="a known limit: the noise is the pool's while both sides vary more "
    "(docs/sequential.md, 'A noisier kept version, read three ways: measured, not adopted')",
)
@pytest.mark.parametrize("known", [4, 8])
def test_null_changes_on_a_kept_noisier_version_are_seldom_kept(known: int) -> None:
    """The promise: where the kept version's runs and the candidate's vary three times as
    much as the pool's, a null change on top of it is kept in fewer than 1 in 10
    comparisons. Today 181 and 166 of these 1,000 (50 and 70 where every version shares
    the noise)."""
    assert kept(3.0, known) < 0.10 * COMPARISONS
