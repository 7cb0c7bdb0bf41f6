"""A seccomp filter that takes the kernel's keyrings, the inode flags and the eviction of
other commands' files from the page cache away from sandboxed commands.

The kernel keeps keyrings per user (`@u`, `@us`) and per session, not per mount or PID
namespace: every command of the same user reaches the same ones, and they outlive the
command. A candidate could leave a number there for its next run, or the holdout for the
next proposer. Container runtimes close this the same way: `add_key`, `request_key` and
`keyctl` fail with `EPERM`, for the native ABI and the 32-bit one the kernel also runs
(an x86-64 process can make i386 system calls, and x32 ones with their own numbers).
The ioctl requests that set a file's inode flags (`chattr +S`, `+A`, ...) fail the same
way: a flag set by one run on the measurement folder would slow the next, and no file
watch sees it. So do `posix_fadvise(POSIX_FADV_DONTNEED)` and `madvise(MADV_COLD,
MADV_PAGEOUT)`, which push files that every run reads (the interpreter, its libraries, a
data set) out of the page cache for free: a candidate that did so at the end of its run
would make the incumbent's run after it read them from the disk, and look faster for it;
and `process_madvise` and `io_uring_setup`, which reach the same past those two calls.

The filter is a classic BPF program built once, here, and installed (`install`) on the
thread that starts the sandboxed commands (`launcher.py`), or in a child between fork and
exec, so bubblewrap and everything it starts run under it. Seccomp filters are inherited
and cannot be removed.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct
import subprocess
import sys
from functools import lru_cache

# <linux/audit.h>
_ARCH_X86_64 = 0xC000003E
_ARCH_I386 = 0x40000003
_ARCH_AARCH64 = 0xC00000B7
_ARCH_ARM = 0x40000028
_X32_BIT = 0x40000000

# What `check` and the safety page list as closed: the calls by name.
CLOSED_CALLS = ("add_key", "request_key", "keyctl")

# FS_IOC_SETFLAGS (the native one and its 32-bit form) and FS_IOC_FSSETXATTR: synchronous
# writes or no access times set by one run would outlive it on the measurement folder,
# whose watch gets no event for them and whose content they leave as it was.
SET_FLAGS_REQUESTS = (0x40086602, 0x40046602, 0x401C5820)
# POSIX_FADV_DONTNEED, and MADV_COLD and MADV_PAGEOUT on a file's mapping: they push
# files other commands read (the interpreter, its libraries, a data set) out of the page
# cache, at no cost to the run that asks, and the run after it (the incumbent's, in a
# comparison) reads them from the disk.
EVICT_FILE = (4,)
EVICT_MAPPING = (20, 21)
# Refused outright: io_uring_setup (io_uring runs fadvise and madvise as operations of its
# own, past the filter) and process_madvise (madvise on a process's memory, its own
# included, by pidfd: MADV_PAGEOUT and MADV_COLD are what it is for).
_IO_URING_SETUP = 425
_PROCESS_MADVISE = 440
_REFUSED = (_IO_URING_SETUP, _PROCESS_MADVISE)

# Per ABI: the calls refused outright, and the calls refused for some values of one
# argument: (number, argument index, values), as each architecture's syscall table numbers
# them. ioctl's request is its argument 1; fadvise's advice follows the 64-bit offset and
# length, which the 32-bit ABIs pass in two registers each (ARM's puts the advice second).
_Rule = tuple[int, int, tuple[int, ...]]
_ABIS: dict[str, tuple[tuple[int, tuple[int, ...], tuple[_Rule, ...]], ...]] = {
    "x86_64": (
        # x32 shares the native ABI's audit arch, its numbers marked by _X32_BIT.
        (
            _ARCH_X86_64,
            (248, 249, 250, *_REFUSED, *(nr | _X32_BIT for nr in (248, 249, 250, *_REFUSED))),
            (
                (16, 1, SET_FLAGS_REQUESTS),
                (221, 3, EVICT_FILE),
                (28, 2, EVICT_MAPPING),
                (514 | _X32_BIT, 1, SET_FLAGS_REQUESTS),
                (221 | _X32_BIT, 3, EVICT_FILE),
                (28 | _X32_BIT, 2, EVICT_MAPPING),
            ),
        ),
        (
            _ARCH_I386,
            (286, 287, 288, *_REFUSED),
            (
                (54, 1, SET_FLAGS_REQUESTS),
                (250, 4, EVICT_FILE),
                (272, 5, EVICT_FILE),
                (219, 2, EVICT_MAPPING),
            ),
        ),
    ),
    "aarch64": (
        (
            _ARCH_AARCH64,
            (217, 218, 219, *_REFUSED),
            ((29, 1, SET_FLAGS_REQUESTS), (223, 3, EVICT_FILE), (233, 2, EVICT_MAPPING)),
        ),
        (
            _ARCH_ARM,
            (309, 310, 311, *_REFUSED),
            ((54, 1, SET_FLAGS_REQUESTS), (270, 1, EVICT_FILE), (220, 2, EVICT_MAPPING)),
        ),
    ),
}

# <linux/filter.h>, <linux/seccomp.h>
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_OFFSET_NR = 0
_OFFSET_ARCH = 4


def _offset_arg(index: int) -> int:
    """Where the low half of args[index] sits in struct seccomp_data (little-endian): the
    kernel takes these arguments as 32 bits, so the upper half changes nothing."""
    return 16 + 8 * index


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine: str) -> bytes | None:
    """The filter for `machine` (`platform.machine()`), or None where its system call
    numbers are not known here."""
    blocks = _ABIS.get(machine)
    if blocks is None:
        return None

    # Laid out as: load arch; per ABI [arch test, load nr, one test per call refused
    # outright (to deny), one test per call refused by argument (to its argument block),
    # allow, then per such call: load the argument, one test per value (to deny), allow];
    # allow (an ABI not listed); deny. Jumps count the instructions they skip; a failed
    # arch test skips its block with the arch still loaded, for the next block's test.
    def size_of(calls: tuple[int, ...], rules: tuple[_Rule, ...]) -> int:
        return 2 + len(calls) + len(rules) + 1 + sum(2 + len(v) for _, _, v in rules)

    size = 1 + sum(size_of(calls, rules) for _, calls, rules in blocks) + 2
    deny = size - 1
    out = [_insn(_LD_W_ABS, _OFFSET_ARCH)]
    for arch, calls, rules in blocks:
        out.append(_insn(_JEQ_K, arch, 0, size_of(calls, rules) - 1))
        out.append(_insn(_LD_W_ABS, _OFFSET_NR))
        for nr in calls:
            out.append(_insn(_JEQ_K, nr, deny - len(out) - 1, 0))
        # Where each argument block starts: past the remaining tests and the allow.
        starts = []
        at = len(out) + len(rules) + 1
        for _, _, values in rules:
            starts.append(at)
            at += 2 + len(values)
        for (nr, _, _), start in zip(rules, starts, strict=True):
            out.append(_insn(_JEQ_K, nr, start - len(out) - 1, 0))
        out.append(_insn(_RET_K, _RET_ALLOW))
        for _, index, values in rules:
            out.append(_insn(_LD_W_ABS, _offset_arg(index)))
            for value in values:
                out.append(_insn(_JEQ_K, value, deny - len(out) - 1, 0))
            out.append(_insn(_RET_K, _RET_ALLOW))
    out.append(_insn(_RET_K, _RET_ALLOW))
    out.append(_insn(_RET_K, _RET_ERRNO | errno.EPERM))
    assert len(out) == size
    return b"".join(out)


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


_LIBC = _libc()
_CODE = program(platform.machine())
# Built before any fork: the child only makes two calls.
_FILTER = ctypes.create_string_buffer(_CODE or b"", len(_CODE or b""))
_FPROG = ctypes.create_string_buffer(
    struct.pack("=HxxxxxxQ", len(_CODE or b"") // 8, ctypes.addressof(_FILTER)), 16
)


def install() -> None:
    """In the child, before exec: the keyring calls fail with EPERM from now on. Raises
    OSError when the kernel refuses (the command then does not start)."""
    if _LIBC is None or _CODE is None:
        return
    # Required of a process without CAP_SYS_ADMIN (bubblewrap needs no setuid bit where
    # user namespaces are allowed).
    if _LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if _LIBC.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, _FPROG, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


# What a probe runs under the filter: it must fail to touch the user keyring, and say how.
_PROBE = (
    "import ctypes, sys\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "nr = {'x86_64': 250, 'aarch64': 219}[sys.argv[1]]\n"
    "r = libc.syscall(nr, 0, -4, 0)\n"  # KEYCTL_GET_KEYRING_ID of @u
    "print(r, ctypes.get_errno())\n"
)


@lru_cache(maxsize=1)
def problem() -> str | None:
    """Why the keyring filter cannot be applied here, or None when it is (probed once: a
    child under the filter asks for the user keyring and must be refused)."""
    machine = platform.machine()
    if _LIBC is None:
        return "not Linux"
    if _CODE is None:
        return f"no keyring filter for {machine} system calls"
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _PROBE, machine],
            preexec_fn=install,
            capture_output=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
            text=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"a filtered command does not start ({exc})"
    if proc.stdout.split() != ["-1", str(errno.EPERM)]:
        return f"the kernel did not apply the filter ({proc.stdout.strip() or proc.stderr})"
    return None
