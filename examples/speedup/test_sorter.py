"""Guard: the sort must stay correct whatever the constants are."""

import random

import sorter


def check() -> None:
    rng = random.Random(7)
    for size in (0, 1, 2, 3, 10, 100, 1000):
        for data in ([rng.random() for _ in range(size)], [rng.randint(0, 3) for _ in range(size)],
                     list(range(size, 0, -1))):
            items = list(data)
            sorter.merge_sort(items)
            assert items == sorted(data), (size, data[:10])


if __name__ == "__main__":
    check()
    print("ok")
