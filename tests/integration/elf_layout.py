"""elf_layout.py - where a file offset of an ELF file is in its virtual
addresses, from Debian's readelf: for the tests that check frames against
addr2line (test_symbols.py, test_debuginfod.py)."""

import subprocess

import heapprof_harness as h


def vaddr_of(path, file_offset):
    """The ELF virtual address of a file offset, through the PT_LOAD headers."""
    out = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True).stdout
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            off, vaddr, filesz = int(f[1], 16), int(f[2], 16), int(f[4], 16)
            if off <= file_offset < off + filesz:
                return vaddr + file_offset - off
    h.check(False, f"offset {file_offset:#x} is in no PT_LOAD of {path}")
