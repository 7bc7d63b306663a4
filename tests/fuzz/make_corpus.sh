#!/usr/bin/env bash
# make_corpus.sh - (re)creates the committed seed corpora of the fuzz targets
# query, proc_maps, elf_file and encoder under tests/fuzz/corpus/. Seeds are
# small on purpose: libFuzzer mutates them, so a few typical inputs of each
# shape are worth more than many large ones. Run from anywhere; needs gcc,
# strip and python3. The maps seeds are taken from live processes, so they
# differ from run to run; that is fine.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
corpus="$here/corpus"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# --- query: query strings as clients send them -------------------------------
mkdir -p "$corpus/query"
i=0
for q in 'pid=1' 'pid=4242&seconds=30' 'pid=123&debug=1' 'pid=4194304&seconds=300&debug=0' \
         'seconds=5' 'pid=abc' 'pid' 'gc=1&pid=7' 'pid=0' 'pid=00042&&debug=' \
         'pid=4194305' 'seconds=301&pid=1' 'debug=2&pid=9' 'pid=7&symbolize=0'; do
    printf '%s' "$q" > "$corpus/query/seed$((i++))"
done

# --- proc_maps: real /proc/PID/maps texts ------------------------------------
mkdir -p "$corpus/proc_maps"
cat /proc/self/maps > "$corpus/proc_maps/cat"
# A process with a deleted file mapped, an anonymous mapping and a shared one.
python3 - "$tmp/gone" > "$corpus/proc_maps/deleted" <<'EOF'
import mmap, os, sys
with open(sys.argv[1], "wb") as f:
    f.write(b"x" * 8192)
f = open(sys.argv[1], "r+b")
m = mmap.mmap(f.fileno(), 8192, mmap.MAP_SHARED)
anon = mmap.mmap(-1, 65536)
os.unlink(sys.argv[1])
with open("/proc/self/maps") as maps:
    lines = maps.read().splitlines()
# Keep it small: the python binary's own lines, the interesting ones, the stack.
keep = [l for l in lines if "(deleted)" in l or "[" in l or l.split()[-1].endswith("python3.11")
        or len(l.split()) == 5]
sys.stdout.write("\n".join(keep[:40]) + "\n")
EOF
# Out of order, no trailing newline, a path with spaces: all things the parser takes.
printf '%s\n%s\n%s' \
    '7f0000003000-7f0000004000 r-xp 00001000 fd:01 1234    /opt/my lib/libx.so' \
    '7f0000001000-7f0000002000 r--p 00000000 fd:01 1234    /opt/my lib/libx.so' \
    'ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]' \
    > "$corpus/proc_maps/unsorted"

# --- elf_file: tiny ELF files of the shapes heapprofd reads ------------------
mkdir -p "$corpus/elf_file"
cat > "$tmp/alloc.c" <<'EOF'
static char pool[4096];
static unsigned long used;
void *malloc(unsigned long n) { void *p = pool + used; used += (n + 15) & ~15ul; return p; }
void free(void *p) { (void)p; }
static int helper(int x) { return x * 3; }
int work(int x) { return helper(x) + 1; }
EOF
cat > "$tmp/versioned.c" <<'EOF'
int foo_v1(void) { return 1; }
int foo_v2(void) { return 2; }
__asm__(".symver foo_v1,foo@V1");
__asm__(".symver foo_v2,foo@@V2");
int bar(void) { return 3; }
EOF
printf 'V1 { global: foo; local: *; };\nV2 { global: foo; bar; } V1;\n' > "$tmp/versioned.map"
cat > "$tmp/exe.c" <<'EOF'
#include <stdlib.h>
int main(void) { void *p = malloc(10); free(p); return 0; }
EOF
# noseparate-code: one page less per file; build IDs as Debian's binaries have them.
ld_small="-Wl,--build-id -Wl,-z,noseparate-code"
gcc -Os -shared -fPIC -nostdlib $ld_small -o "$corpus/elf_file/alloc.so" "$tmp/alloc.c"
strip -o "$corpus/elf_file/alloc_stripped.so" "$corpus/elf_file/alloc.so"
gcc -Os -shared -fPIC $ld_small -Wl,--version-script="$tmp/versioned.map" \
    -o "$corpus/elf_file/versioned.so" "$tmp/versioned.c"
gcc -Os $ld_small -o "$corpus/elf_file/exe" "$tmp/exe.c"

# --- encoder: scripts for fuzz_encoder.c -------------------------------------
# Opcodes (byte % 12) and string picks (byte < 0xc0: POOL[byte % 12]) as in
# fuzz_encoder.c; numbers: a byte < 0xc0 is itself, 0xe0+k is k+1 raw bytes.
mkdir -p "$corpus/encoder"
python3 - "$corpus/encoder" <<'EOF'
import os, sys
out = sys.argv[1]
TYPE, PERIOD, DEFAULT, TIME, COMMENT, MAPPING, FLAGS, FUNCTION, LOCATION, _, SAMPLE, _ = range(12)
# POOL indexes
EMPTY, AOBJ, ASPACE, IOBJ, ISPACE, COUNT, BYTES, SPACE, MALLOC, MAIN, LIBC, UTF8 = range(12)

def num(v):
    """A number as take_u64 reads it."""
    if 0 <= v < 0xc0:
        return bytes([v])
    v &= (1 << 64) - 1
    return bytes([0xe7]) + v.to_bytes(8, "little")

def raw(s):
    """A string of the script's own bytes."""
    b = s.encode()
    return bytes([0xe0 | len(b)]) + b

heap = bytes([TYPE, AOBJ, COUNT, TYPE, ASPACE, BYTES, TYPE, IOBJ, COUNT, TYPE, ISPACE, BYTES])
heap += bytes([PERIOD, SPACE, BYTES]) + num(524288) + bytes([DEFAULT, ISPACE])
heap += bytes([TIME]) + num(1700000000000000000) + num(30 * 10**9)
heap += bytes([COMMENT]) + raw("dropped 0")
heap += bytes([MAPPING]) + num(0x7f0000000000) + num(0x200000) + num(0) + bytes([LIBC]) + raw("ab12") + bytes([1])
heap += bytes([FUNCTION, MALLOC, MALLOC, LIBC]) + num(0)
heap += bytes([FUNCTION, MAIN, MAIN]) + raw("/src/main.c") + num(3)
heap += bytes([LOCATION, 1]) + num(0x7f0000001234) + bytes([1, 1]) + num(10)
heap += bytes([LOCATION, 0]) + num(0x401000) + bytes([2, 2]) + num(12) + bytes([1]) + num(7)
for values in ([1, 100, 1, 100], [3, 48, 0, 0], [(1 << 64) - 1, 7, 2, 5]):
    heap += bytes([SAMPLE, 2, 1, 2, 2]) + b"".join(num(v) for v in values) + bytes([1, AOBJ, UTF8])
open(os.path.join(out, "heap"), "wb").write(heap)

# Errors the model expects: samples before and after types, bad ids, flags.
errs = bytes([SAMPLE, 0, 2, 0, TYPE, SPACE, BYTES, MAPPING]) + num(100) + num((1 << 64) - 50)
errs += num(0) + bytes([EMPTY, EMPTY, 0, FLAGS, 5, 0xff, LOCATION, 9]) + num(1) + bytes([0])
errs += bytes([SAMPLE, 1, 7, 0]) + num(1) + bytes([0, TYPE, COUNT, COUNT, DEFAULT, MAIN])
open(os.path.join(out, "errors"), "wb").write(errs)

# Many functions and locations: the hash indexes grow past their first 64 slots.
grow = bytes([TYPE, COUNT, COUNT])
for i in range(70):
    grow += bytes([FUNCTION, MAIN]) + raw("f%d" % i) + bytes([LIBC]) + num(i)
    grow += bytes([LOCATION, 0]) + num(0x1000 + i) + bytes([1, i % 70 + 1]) + num(i)
open(os.path.join(out, "grow"), "wb").write(grow)
EOF
echo "seeds written under $corpus"
