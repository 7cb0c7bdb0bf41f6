"""Code for a probe that makes system calls through the i386 ABI (`int 0x80`, which an
x86-64 process may use) and the x32 one (the native numbers with bit 30 set), with every
pointer below 2 GiB: what the sandbox's seccomp filter must refuse on every ABI, attacked
for real. `i386(nr, *args)` takes at most five arguments; `at(offset, data)` places data
where both ABIs reach it."""

ABI_32 = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
page = libc.mmap(None, 8192, 7, 0x22 | 0x40, -1, 0)  # rwx, private anonymous, MAP_32BIT
# six 32-bit words at [rdi]: eax, ebx, ecx, edx, esi, edi; then int 0x80
code = bytes([0x53, 0x8b, 0x07, 0x8b, 0x5f, 0x04, 0x8b, 0x4f, 0x08, 0x8b, 0x57, 0x0c,
              0x8b, 0x77, 0x10, 0x57, 0x8b, 0x7f, 0x14, 0xcd, 0x80, 0x5f, 0x5b, 0xc3])
ctypes.memmove(page, code, len(code))
call = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(page)
def at(offset, data):
    ctypes.memmove(page + offset, data, len(data))
    return page + offset
def i386(*args):
    words = (ctypes.c_int * 6)(*(list(args) + [0] * (6 - len(args))))
    return call(ctypes.addressof(words))
def x32(nr, *args):
    return libc.syscall(0x40000000 | nr, *args)
"""
