"""Guard: the answers must stay right."""

from primes import count_primes, is_prime

assert [k for k in range(30) if is_prime(k)] == [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]
assert [count_primes(n) for n in (0, 1, 2, 3, 10, 100, 1000)] == [0, 0, 0, 1, 4, 25, 168]
print("ok")
