"""Conformance suites for proposer and executor kinds, shipped with the package.

`proposer_suite` holds the checks every proposer kind must pass and `KINDS`, one entry per
kind saying how to build it against a stand-in tool; `executor_suite` does the same for
executors with `EXECUTORS`. The checks are plain functions that raise AssertionError, so
importing them needs no test framework; a test module parametrizes over the lists (see
tests/conformance/). A new kind gets the suite by adding one entry to its list.
`comparisons.drive` runs one comparison of the judge as the evaluator drives it, for tests
and benches of the judge in process.
"""
