"""One comparison driven as the evaluator drives it, for tests of the judge in process."""

from __future__ import annotations

from collections.abc import Callable

from autoresearch.stats.decide import Side, Verdict
from autoresearch.stats.sample_book import SampleBook


def drive(
    live: SampleBook,
    incumbent: str,
    commit: str,
    candidate: Callable[[], float],
    remeasure: Callable[[], float],
) -> tuple[Verdict, list[float], list[float]]:
    """The comparison's verdict, the candidate's runs and the incumbent's re-measurements:
    its runs go back into the book in the order taken, and a keep makes the incumbent."""
    test = live.comparison(incumbent)
    samples: list[float] = []
    again: list[float] = []
    while isinstance(side := test.next(), Side):
        if side is Side.INCUMBENT:
            value = remeasure()
            again.append(value)
            live.remeasured(incumbent, value)
        else:
            value = candidate()
            samples.append(value)
        test.add(value)
    live.measured(commit, samples, incumbent, test.taken)
    if test.verdict is Verdict.KEEP:
        live.kept(commit)
    return test.verdict, samples, again
