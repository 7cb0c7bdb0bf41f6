"""A hybrid merge sort: small runs are finished by insertion sort.

The constants are the knobs; the right values depend on the machine and the interpreter.
"""

# Runs shorter than this are sorted by insertion sort instead of being split further.
CUTOFF = 1
# Skip the merge when the two halves are already in order (cheap check, big win on sorted data).
CHECK_ORDERED = False


def insertion_sort(items: list[float], lo: int, hi: int) -> None:
    for i in range(lo + 1, hi):
        value = items[i]
        j = i - 1
        while j >= lo and items[j] > value:
            items[j + 1] = items[j]
            j -= 1
        items[j + 1] = value


def merge_sort(items: list[float], lo: int = 0, hi: int | None = None) -> None:
    if hi is None:
        hi = len(items)
    if hi - lo <= max(CUTOFF, 1):
        insertion_sort(items, lo, hi)
        return
    mid = (lo + hi) // 2
    merge_sort(items, lo, mid)
    merge_sort(items, mid, hi)
    if CHECK_ORDERED and items[mid - 1] <= items[mid]:
        return
    left = items[lo:mid]
    right = items[mid:hi]
    i = j = 0
    k = lo
    while i < len(left) and j < len(right):
        if left[i] <= right[j]:
            items[k] = left[i]
            i += 1
        else:
            items[k] = right[j]
            j += 1
        k += 1
    items[k : k + len(left) - i] = left[i:]
    k += len(left) - i
    items[k : k + len(right) - j] = right[j:]
