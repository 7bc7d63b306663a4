/*
 * unwind_table_bench.c - how long building an unwind table takes and how big
 * it is (daemon/unwind/unwind_table.c): rows, bytes, and rows per MiB of
 * executable code (the sum of the executable PT_LOADs), the figures that size
 * the unwind row map in bpf/hp_limits.h.
 *
 *   build/tests/bench/unwind_table_bench [FILE...]
 *
 * Defaults to Debian's libc.so.6 and python3. The time is the best of
 * BENCH_ROUNDS builds from the page cache, file reading included.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "unwind_table.h"

/* Builds per file; the best is reported, which hides one-off page-cache misses. */
#define BENCH_ROUNDS 20

/* Bytes of executable code in `path` (executable PT_LOADs) and of its .eh_frame; 0 if unknown. */
static void file_sizes(const char *path, uint64_t *text, uint64_t *eh_frame)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    Elf *elf = NULL;
    size_t phnum, shstrndx;
    GElf_Phdr ph;
    GElf_Shdr sh;

    *text = *eh_frame = 0;
    if (fd < 0 || elf_version(EV_CURRENT) == EV_NONE || !(elf = elf_begin(fd, ELF_C_READ, NULL)))
        goto out;
    if (elf_getphdrnum(elf, &phnum) == 0)
        for (size_t i = 0; i < phnum; i++)
            if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
                *text += ph.p_memsz;
    if (elf_getshdrstrndx(elf, &shstrndx) == 0)
        for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
            const char *name;
            if (gelf_getshdr(scn, &sh) && (name = elf_strptr(elf, shstrndx, sh.sh_name)) &&
                strcmp(name, ".eh_frame") == 0)
                *eh_frame = sh.sh_size;
        }
out:
    if (elf)
        elf_end(elf);
    if (fd >= 0)
        close(fd);
}

/* Seconds on the monotonic clock. */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Builds the table of `path` BENCH_ROUNDS times and prints one line of figures. */
static int bench(const char *path)
{
    struct unwind_table t;
    double best = 1e9;
    uint64_t text, eh;
    int err = 0;

    for (int i = 0; i < BENCH_ROUNDS; i++) {
        double t0 = now();
        err = unwind_table_build(path, &t);
        double dt = now() - t0;
        if (err) {
            fprintf(stderr, "%s: %s\n", path, strerror(-err));
            return err;
        }
        if (dt < best)
            best = dt;
        if (i + 1 < BENCH_ROUNDS)
            unwind_table_free(&t);
    }
    file_sizes(path, &text, &eh);
    double mib = (double)text / (1024.0 * 1024.0);
    size_t bytes = t.n * sizeof(*t.rows);
    printf("%-40s %8.2f %7zu %8zu %9zu %8.2f %7.2f %8.0f %9.0f %6zu %6zu\n", path, best * 1e3,
           t.fdes, t.n, bytes, mib, (double)eh / (1024.0 * 1024.0), mib > 0 ? t.n / mib : 0,
           mib > 0 ? bytes / mib : 0, t.unsupported_cfa, t.unsupported_rbp);
    unwind_table_free(&t);
    return 0;
}

int main(int argc, char **argv)
{
    static const char *const defaults[] = {"/lib/x86_64-linux-gnu/libc.so.6", "/usr/bin/python3"};
    const char *const *files = argc > 1 ? (const char *const *)argv + 1 : defaults;
    int n = argc > 1 ? argc - 1 : 2, failed = 0;

    printf("%-40s %8s %7s %8s %9s %8s %7s %8s %9s %6s %6s\n", "file", "ms", "FDEs", "rows", "bytes",
           "text MiB", "eh MiB", "rows/MiB", "bytes/MiB", "uncfa", "unrbp");
    for (int i = 0; i < n; i++)
        failed |= bench(files[i]) != 0;
    return failed;
}
