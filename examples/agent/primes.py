"""Count primes below n. Correct, and slow on purpose: a coding agent's job is to speed it up."""


def is_prime(k: int) -> bool:
    if k < 2:
        return False
    for d in range(2, k):
        if k % d == 0:
            return False
    return True


def count_primes(n: int) -> int:
    return sum(1 for k in range(n) if is_prime(k))
