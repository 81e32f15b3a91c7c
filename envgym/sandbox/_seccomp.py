"""The seccomp filter every bwrap sandbox command runs under (``bwrap --seccomp FD``).

A classic BPF program, built here with the standard library (no libseccomp): it refuses, with
``EPERM``, the system calls an agent could use to reach past its sandbox or outlive it:

* watching or steering other processes: ``ptrace``, ``process_vm_readv``/``writev``,
  ``pidfd_getfd``, ``kcmp``, ``process_madvise`` (a traced namespace init could have its
  die-with-parent turned off and survive its command, its episode and its owner);
* new namespaces: ``unshare``, ``setns`` and ``clone`` with any ``CLONE_NEW*`` flag; ``clone3``
  answers ``ENOSYS`` (its flags sit in memory a filter cannot read), so libc falls back to
  ``clone``;
* the kernel's large attack surfaces: ``bpf``, ``perf_event_open``, ``userfaultfd``, the
  ``io_uring`` calls, ``keyctl``/``add_key``/``request_key``, module and kexec loading;
* mounts and the rest of the administrator's calls (``mount``, ``pivot_root``, the new mount API,
  ``swapon``, ``reboot``, ``acct``, ``quotactl``, ``syslog``, clock setting, handles by inode).

Any other architecture than the one the filter was built for is killed, as are x32 calls on
x86_64 (their numbers would slip past the table). Tables exist for x86_64 and aarch64; elsewhere
:func:`filter_program` returns None and the sandbox says so in
:meth:`~envgym.sandbox.BwrapSandbox.isolation`.
"""

from __future__ import annotations

import errno
import os
import platform
import struct

__all__ = ["BLOCKED", "filter_program", "memfd_with"]

# BPF opcodes (linux/filter.h, linux/bpf_common.h)
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
# seccomp return values (linux/seccomp.h)
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000
# struct seccomp_data offsets: int nr; u32 arch; u64 ip; u64 args[6] (little-endian)
_OFF_NR, _OFF_ARCH, _OFF_ARG0_LOW = 0, 4, 16
_X32_SYSCALL_BIT = 0x40000000
#: CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | NEWTIME
CLONE_NEW_ANY = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x00000080

#: Blocked calls: name -> (x86_64 number, aarch64 number or None where the call does not exist).
BLOCKED: dict[str, tuple[int, int | None]] = {
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "pidfd_getfd": (438, 438),
    "process_madvise": (440, 440),
    "kcmp": (312, 272),
    "unshare": (272, 97),
    "setns": (308, 268),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "move_mount": (429, 429),
    "open_tree": (428, 428),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "reboot": (169, 142),
    "acct": (163, 89),
    "quotactl": (179, 60),
    "quotactl_fd": (443, 443),
    "syslog": (103, 116),
    "lookup_dcookie": (212, 18),
    "open_by_handle_at": (304, 265),
    "name_to_handle_at": (303, 264),
    "fanotify_init": (300, 262),
    "vhangup": (153, 58),
    "settimeofday": (164, 170),
    "clock_settime": (227, 112),
    "clock_adjtime": (305, 266),
    "adjtimex": (159, 171),
    "iopl": (172, None),
    "ioperm": (173, None),
    "modify_ldt": (154, None),
    "uselib": (134, None),
}
_CLONE = {"x86_64": 56, "aarch64": 220}
_CLONE3 = 435
#: AUDIT_ARCH_* values (linux/audit.h).
_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_MACHINE_ALIASES = {"amd64": "x86_64", "arm64": "aarch64"}


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def filter_program(machine: str | None = None) -> bytes | None:
    """The compiled filter (``struct sock_filter`` array) for ``machine`` (default: this one),
    or None when no syscall table is known for it."""
    name = (machine or platform.machine()).lower()
    name = _MACHINE_ALIASES.get(name, name)
    if name not in _ARCH:
        return None
    column = 0 if name == "x86_64" else 1
    deny = _RET_ERRNO | errno.EPERM
    prog = [
        _insn(_LD_W_ABS, 0, 0, _OFF_ARCH),
        _insn(_JEQ_K, 1, 0, _ARCH[name]),
        _insn(_RET_K, 0, 0, _RET_KILL_PROCESS),
        _insn(_LD_W_ABS, 0, 0, _OFF_NR),
    ]
    if name == "x86_64":
        prog += [_insn(_JGE_K, 0, 1, _X32_SYSCALL_BIT), _insn(_RET_K, 0, 0, _RET_KILL_PROCESS)]
    for numbers in BLOCKED.values():
        number = numbers[column]
        if number is not None:
            prog += [_insn(_JEQ_K, 0, 1, number), _insn(_RET_K, 0, 0, deny)]
    prog += [_insn(_JEQ_K, 0, 1, _CLONE3), _insn(_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS)]
    # clone(flags, ...): refuse any CLONE_NEW* flag (the accumulator is reloaded for the test)
    prog += [
        _insn(_JEQ_K, 0, 4, _CLONE[name]),
        _insn(_LD_W_ABS, 0, 0, _OFF_ARG0_LOW),
        _insn(_JSET_K, 0, 1, CLONE_NEW_ANY),
        _insn(_RET_K, 0, 0, deny),
        _insn(_RET_K, 0, 0, _RET_ALLOW),
        _insn(_RET_K, 0, 0, _RET_ALLOW),
    ]
    return b"".join(prog)


def memfd_with(data: bytes) -> int:
    """A file descriptor positioned at the start of ``data`` (what ``bwrap --seccomp`` reads)."""
    fd = os.memfd_create("envgym-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd
