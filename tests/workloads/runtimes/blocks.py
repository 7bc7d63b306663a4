"""blocks.py - Python workload for tests/integration/test_runtimes.py:
bytearrays (malloc'd by CPython's allocator past its small-object arenas)
from a named function. Speaks the handshake of ../handshake.h."""
import os
import sys

ROUNDS = 20
PER_ROUND = 500
kept = []


def allocate_named_blocks(n):
    for i in range(n):
        b = bytearray(65536 + (i % 7) * 4096)
        if i % 4 == 0:
            kept.append(b)


print(f"ready {os.getpid()}", flush=True)
sys.stdin.readline()
for _ in range(ROUNDS):
    allocate_named_blocks(PER_ROUND)
print("done", flush=True)
sys.stdin.readline()
