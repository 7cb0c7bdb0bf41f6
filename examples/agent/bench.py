"""Harness: time count_primes(20000) and check its answer."""

import time

from primes import count_primes

started = time.perf_counter()
result = count_primes(20000)
elapsed = time.perf_counter() - started
if result != 2262:
    raise SystemExit(f"wrong answer: {result}")
print(f"seconds: {elapsed:.4f}")
