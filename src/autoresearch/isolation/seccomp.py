"""A seccomp filter that takes the kernel's keyrings and the inode flags away from sandboxed
commands.

The kernel keeps keyrings per user (`@u`, `@us`) and per session, not per mount or PID
namespace: every command of the same user reaches the same ones, and they outlive the
command. A candidate could leave a number there for its next run, or the holdout for the
next proposer. Container runtimes close this the same way: `add_key`, `request_key` and
`keyctl` fail with `EPERM`, for the native ABI and the 32-bit one the kernel also runs
(an x86-64 process can make i386 system calls, and x32 ones with their own numbers).
The ioctl requests that set a file's inode flags (`chattr +S`, `+A`, ...) fail the same
way: a flag set by one run on the measurement folder would slow the next, and no file
watch sees it.

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

# add_key, request_key, keyctl per ABI, as each architecture's syscall table numbers them.
_KEYRING_CALLS: dict[str, tuple[tuple[int, tuple[int, ...]], ...]] = {
    "x86_64": (
        (_ARCH_X86_64, (248, 249, 250, 248 | _X32_BIT, 249 | _X32_BIT, 250 | _X32_BIT)),
        (_ARCH_I386, (286, 287, 288)),
    ),
    "aarch64": (
        (_ARCH_AARCH64, (217, 218, 219)),
        (_ARCH_ARM, (309, 310, 311)),
    ),
}
# What `check` and the safety page list as closed: the calls by name.
CLOSED_CALLS = ("add_key", "request_key", "keyctl")

# ioctl per ABI, and the requests that set a file's inode flags (`chattr`): synchronous
# writes or no access times set by one run would outlive it on the measurement folder,
# whose watch gets no event for them and whose content they leave as it was.
_IOCTL: dict[int, tuple[int, ...]] = {
    _ARCH_X86_64: (16, 514 | _X32_BIT),
    _ARCH_I386: (54,),
    _ARCH_AARCH64: (29,),
    _ARCH_ARM: (54,),
}
# FS_IOC_SETFLAGS (the native one and its 32-bit form) and FS_IOC_FSSETXATTR.
SET_FLAGS_REQUESTS = (0x40086602, 0x40046602, 0x401C5820)

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
_OFFSET_ARG1 = 24  # the low half of args[1] (little-endian): ioctl's request


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine: str) -> bytes | None:
    """The filter for `machine` (`platform.machine()`), or None where its system call
    numbers are not known here."""
    blocks = _KEYRING_CALLS.get(machine)
    if blocks is None:
        return None
    # Laid out as: load arch; per ABI [arch test, load nr, one test per denied call, one
    # test per ioctl number (to the request tests), allow, load the request, one test per
    # request, allow]; allow (an ABI not listed); deny. Jumps count the instructions they
    # skip; a failed arch test skips its block with the arch still loaded, for the next
    # block's test.
    tail = 1 + 1 + len(SET_FLAGS_REQUESTS) + 1  # allow, load the request, its tests, allow
    size = 1 + sum(2 + len(calls) + len(_IOCTL[arch]) + tail for arch, calls in blocks) + 2
    deny = size - 1
    out = [_insn(_LD_W_ABS, _OFFSET_ARCH)]
    for arch, calls in blocks:
        ioctls = _IOCTL[arch]
        block = 2 + len(calls) + len(ioctls) + tail
        out.append(_insn(_JEQ_K, arch, 0, block - 1))
        out.append(_insn(_LD_W_ABS, _OFFSET_NR))
        for nr in calls:
            here = len(out)
            out.append(_insn(_JEQ_K, nr, deny - here - 1, 0))
        for i, nr in enumerate(ioctls):
            # To the request tests: past the remaining ioctl numbers and the allow.
            out.append(_insn(_JEQ_K, nr, len(ioctls) - i, 0))
        out.append(_insn(_RET_K, _RET_ALLOW))
        out.append(_insn(_LD_W_ABS, _OFFSET_ARG1))
        for request in SET_FLAGS_REQUESTS:
            here = len(out)
            out.append(_insn(_JEQ_K, request, deny - here - 1, 0))
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
