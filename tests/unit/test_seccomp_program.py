"""The seccomp filter's program, run on a small interpreter of the three BPF instructions it
uses, for every ABI of both machines it is built for: aarch64's jumps are checked here
too, where no aarch64 kernel runs it. The numbers below are the kernels' system call
tables, written out again rather than read from the module under test."""

from __future__ import annotations

import errno
import struct

import pytest

from autoresearch.isolation import seccomp

X32 = 0x40000000
# (audit arch, (add_key, request_key, keyctl), ioctl) per ABI; x32 shares x86-64's arch.
ABIS = {
    "x86_64": (
        (0xC000003E, (248, 249, 250), 16),
        (0xC000003E, (248 | X32, 249 | X32, 250 | X32), 514 | X32),
        (0x40000003, (286, 287, 288), 54),
    ),
    "aarch64": (
        (0xC00000B7, (217, 218, 219), 29),
        (0x40000028, (309, 310, 311), 54),
    ),
}
SETS_FLAGS = (0x40086602, 0x40046602, 0x401C5820)  # FS_IOC_SETFLAGS (64, 32), FSSETXATTR
READS_FLAGS = (0x80086601, 0x80046601, 0x801C581F)  # their GET twins
ALLOW, DENY = 0x7FFF0000, 0x00050000 | errno.EPERM


def run(program: bytes, nr: int, arch: int, arg1: int = 0, args: tuple[int, ...] = ()) -> int:
    """What the filter returns for one system call (struct seccomp_data, little-endian):
    `arg1` its second argument, or `args` all six."""
    values = list(args) + [0] * (6 - len(args)) if args else [0, arg1, 0, 0, 0, 0]
    data = struct.pack("<iIQ6Q", nr, arch, 0, *values)
    code = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    pc, acc = 0, 0
    while True:
        op, jt, jf, k = code[pc]
        if op == 0x20:  # BPF_LD | BPF_W | BPF_ABS
            acc = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif op == 0x15:  # BPF_JMP | BPF_JEQ | BPF_K
            pc += 1 + (jt if acc == k else jf)
        elif op == 0x06:  # BPF_RET | BPF_K
            return int(k)
        else:
            raise AssertionError(f"unexpected instruction {op:#x}")


@pytest.mark.parametrize("machine", sorted(ABIS))
def test_the_filter_refuses_keyrings_and_setting_inode_flags_on_every_abi(machine: str) -> None:
    program = seccomp.program(machine)
    assert program is not None
    for arch, keyring, ioctl in ABIS[machine]:
        for nr in keyring:
            assert run(program, nr, arch) == DENY, (machine, hex(arch), nr)
        for request in SETS_FLAGS:
            assert run(program, ioctl, arch, request) == DENY, (hex(arch), hex(request))
            # The kernel takes the request as 32 bits: the upper half changes nothing.
            assert run(program, ioctl, arch, request | 1 << 32) == DENY
            # The same number as another call's second argument is that call's business.
            assert run(program, ioctl + 1, arch, request) == ALLOW
        for request in (*READS_FLAGS, 0x5401, 0):  # the GET twins, TCGETS, nothing
            assert run(program, ioctl, arch, request) == ALLOW, (hex(arch), hex(request))
        assert run(program, 0, arch) == ALLOW
    # An ABI the filter does not know runs unfiltered rather than being refused.
    assert run(program, 16, 0x12345678, SETS_FLAGS[0]) == ALLOW


def test_no_program_for_a_machine_whose_numbers_are_not_known() -> None:
    assert seccomp.program("riscv64") is None


# Per ABI: the calls that push a file out of the page cache, with the index of the argument
# that says so (fadvise's advice; madvise's), and the calls refused outright for reaching
# the same past them (io_uring_setup, process_madvise). From the kernels' tables.
EVICTING = {
    "x86_64": (
        (0xC000003E, ((221, 3),), 28, (425, 440)),
        (0xC000003E, ((221 | X32, 3),), 28 | X32, (425 | X32, 440 | X32)),
        (0x40000003, ((250, 4), (272, 5)), 219, (425, 440)),
    ),
    "aarch64": (
        (0xC00000B7, ((223, 3),), 233, (425, 440)),
        (0x40000028, ((270, 1),), 220, (425, 440)),
    ),
}
DONTNEED, NORMAL, SEQUENTIAL, WILLNEED = 4, 0, 2, 3
COLD, PAGEOUT, MADV_DONTNEED, HUGEPAGE = 20, 21, 4, 14


def args_with(index: int, value: int) -> tuple[int, ...]:
    """Six arguments, `value` at `index`, small distinct numbers elsewhere."""
    return tuple(value if i == index else 100 + i for i in range(6))


@pytest.mark.parametrize("machine", sorted(EVICTING))
def test_the_filter_refuses_pushing_files_out_of_the_page_cache_on_every_abi(
    machine: str,
) -> None:
    program = seccomp.program(machine)
    assert program is not None
    for arch, fadvise, madvise, refused in EVICTING[machine]:
        for nr, index in fadvise:
            assert run(program, nr, arch, args=args_with(index, DONTNEED)) == DENY, (arch, nr)
            assert run(program, nr, arch, args=args_with(index, DONTNEED | 1 << 32)) == DENY
            for advice in (NORMAL, SEQUENTIAL, WILLNEED):
                assert run(program, nr, arch, args=args_with(index, advice)) == ALLOW
            # DONTNEED's number in another argument (a file descriptor 4) is allowed.
            other = (index + 1) % 6
            assert run(program, nr, arch, args=args_with(other, DONTNEED)) == ALLOW
        for advice in (COLD, PAGEOUT):
            assert run(program, madvise, arch, args=args_with(2, advice)) == DENY, arch
        for advice in (MADV_DONTNEED, HUGEPAGE, NORMAL):
            assert run(program, madvise, arch, args=args_with(2, advice)) == ALLOW, arch
        assert run(program, madvise, arch, args=args_with(1, PAGEOUT)) == ALLOW
        for nr in refused:
            assert run(program, nr, arch) == DENY, (arch, nr)
            assert run(program, nr + 1, arch) == ALLOW, (arch, nr)
