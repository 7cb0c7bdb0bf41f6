"""Harness: time sorter.merge_sort on fixed inputs; print the best of several runs in ms.

Wall-clock time is noisy: other processes, frequency scaling and caches move it by a few
percent from run to run. That is what this example is for.
"""

import random
import time

import sorter

rng = random.Random(1234)
inputs = [
    [rng.random() for _ in range(20000)],
    sorted(rng.random() for _ in range(20000)),
    [rng.randint(0, 50) for _ in range(20000)],
]

best = float("inf")
for _ in range(3):
    started = time.perf_counter()
    for data in inputs:
        items = list(data)
        sorter.merge_sort(items)
        if items != sorted(data):
            raise SystemExit("merge_sort returned a wrong order")
    best = min(best, time.perf_counter() - started)
print(f"sort_ms: {1000 * best:.3f}")
