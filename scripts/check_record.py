#!/usr/bin/env python3
"""Check that a vmcore holds the rust_panic_record sample's record at the address it printed.

  check_record.py --console console.log --vmcore vmcore.elf --message "sysrq triggered crash"

The sample prints `record at physical address 0x...` at init; at panic it writes, at that address,
the 16-byte magic, the message length (u32 LE), the panic count (u32 LE) and the message. The
vmcore is an ELF core (kdump's /proc/vmcore or QEMU's dump-guest-memory) whose PT_LOAD program
headers map physical addresses to file offsets.
"""

import argparse
import re
import struct
import sys

MAGIC = b"CSPD-PANIC-REC1\0"
PT_LOAD = 1


class Bad(Exception):
    pass


def phys_reader(path):
    """Returns a function reading `n` bytes at physical address `pa` from an ELF64 LE vmcore."""
    f = open(path, "rb")
    ident = f.read(64)
    if len(ident) < 64 or ident[:4] != b"\x7fELF":
        raise Bad(f"{path}: not an ELF file")
    if ident[4] != 2 or ident[5] != 1:
        raise Bad(f"{path}: not a 64-bit little-endian ELF")
    phoff, = struct.unpack_from("<Q", ident, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", ident, 0x36)
    if phentsize != 56 or phnum == 0:
        raise Bad(f"{path}: unexpected program header table (entsize {phentsize}, count {phnum})")
    f.seek(phoff)
    table = f.read(phentsize * phnum)
    if len(table) != phentsize * phnum:
        raise Bad(f"{path}: program header table at offset {phoff} is truncated")
    loads = []
    for i in range(phnum):
        p_type, _, p_offset, _, p_paddr, p_filesz, _, _ = struct.unpack_from("<IIQQQQQQ", table, i * 56)
        if p_type == PT_LOAD:
            loads.append((p_paddr, p_filesz, p_offset))

    def read(pa, n):
        for start, size, off in loads:
            if start <= pa and pa + n <= start + size:
                f.seek(off + pa - start)
                data = f.read(n)
                if len(data) != n:
                    raise Bad(f"{path}: PT_LOAD for {pa:#x} points past the end of the file")
                return data
        raise Bad(f"{path}: physical address {pa:#x} (+{n}) is not in any PT_LOAD")

    return read


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--console", required=True)
    p.add_argument("--vmcore", required=True)
    p.add_argument("--message", required=True, help="the panic message the test triggered")
    a = p.parse_args()
    try:
        text = open(a.console, errors="replace").read()
        m = re.findall(r"rust_panic_record: record at physical address (0x[0-9a-f]+)", text)
        if not m:
            raise Bad(f"{a.console}: the sample never printed its record address (module not loaded?)")
        pa = int(m[-1], 16)
        read = phys_reader(a.vmcore)
        head = read(pa, 24)
        if head[:16] != MAGIC:
            raise Bad(f"{a.vmcore}: no record at {pa:#x}: found {head[:16]!r} instead of the magic")
        length, count = struct.unpack_from("<II", head, 16)
        if length > 4096 - 24:
            raise Bad(f"{a.vmcore}: record at {pa:#x} claims a {length} byte message")
        msg = read(pa + 24, length).decode(errors="replace")
        if msg != a.message:
            raise Bad(f"{a.vmcore}: record at {pa:#x} holds message {msg!r}, expected {a.message!r}")
        if count != 1:
            raise Bad(f"{a.vmcore}: record at {pa:#x} says the notifier ran {count} times, expected 1")
        print(f"record found at {pa:#x}: panic message {msg!r}, written once")
        return 0
    except (Bad, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
