/*
 * fuzz_elf_file.c - libFuzzer target for the ELF reader (daemon/process/elf_file.c):
 * program headers, build ID notes, symbol tables, versions, DT_NEEDED.
 *
 * elf_file_open() takes a path, so each input is written to a memfd and
 * opened as /proc/self/fd/N (one memfd for the whole run, rewritten per
 * input: libFuzzer calls the target once per input from one thread). An
 * opened file then goes through every query, with the results checked
 * against what elf_file.h promises: names found are the names asked for,
 * a symbol found by address covers it and is found again by name, offsets
 * and addresses translate both ways, DT_NEEDED entries are strings.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "elf_file.h"
#include "fuzz_check.h"

/* Room for the longest build ID elf_file keeps (64 bytes) as hex. */
#define BUILD_ID_HEX 129

/* Names looked up in every file: what allocator.c asks for, and a few others. */
static const char *const NAMES[] = {
    "malloc", "free", "calloc", "realloc", "main", "_start", "", "f@@V", "__libc_malloc",
};

/* The memfd the inputs are written to; -1 until the first input. */
static int memfd = -1;

/* Writes the input to the memfd, replacing the last one; returns 0 or -errno. */
static int write_input(const uint8_t *data, size_t size)
{
    if (memfd < 0) {
        memfd = memfd_create("fuzz_elf_file", MFD_CLOEXEC);
        if (memfd < 0)
            return -errno;
    }
    if (ftruncate(memfd, 0) != 0)
        return -errno;
    size_t done = 0;
    while (done < size) {
        ssize_t w = pwrite(memfd, data + done, size - done, (off_t)done);
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        done += (size_t)w;
    }
    return 0;
}

/* Checks a symbol found for `name` (NULL: found by address `addr`). */
static void check_symbol(const struct elf_file *ef, const struct elf_symbol *s, const char *name,
                         uint64_t addr)
{
    FUZZ_CHECK(s->name != NULL, "symbol without a name");
    FUZZ_CHECK(strchr(s->name, '@') == NULL, "version suffix left in \"%s\"", s->name);
    if (name)
        FUZZ_CHECK(strcmp(s->name, name) == 0, "looked up \"%s\", found \"%s\"", name, s->name);
    else
        FUZZ_CHECK(s->vaddr <= addr && (s->size == 0 || addr - s->vaddr < s->size),
                   "0x%" PRIx64 " symbolized as %s at 0x%" PRIx64 " size %" PRIu64, addr, s->name,
                   s->vaddr, s->size);
    uint64_t off;
    if (elf_file_vaddr_to_offset(ef, s->vaddr, &off) == 0)
        FUZZ_CHECK(off == s->file_offset,
                   "%s: file_offset 0x%" PRIx64 ", vaddr_to_offset 0x%" PRIx64, s->name,
                   s->file_offset, off);
    else
        FUZZ_CHECK(s->file_offset == 0, "%s: file_offset 0x%" PRIx64 " outside every PT_LOAD",
                   s->name, s->file_offset);
    uint8_t code[16];
    int err = elf_file_read(ef, s->vaddr, code, sizeof(code));
    FUZZ_CHECK(err == 0 || err == -ENOENT || err == -EIO || err == -EINVAL, "read: %d", err);
}

/* Symbolizes `addr`, and finds the symbol again by its name. */
static void check_address(const struct elf_file *ef, uint64_t addr)
{
    struct elf_symbol s;
    if (elf_file_symbolize(ef, addr, &s) != 0)
        return;
    check_symbol(ef, &s, NULL, addr);
    /* Names are looked up in the same table symbolization uses. */
    struct elf_symbol again;
    FUZZ_CHECK(elf_file_find_function(ef, s.name, false, &again) == 0,
               "\"%s\" symbolizes 0x%" PRIx64 " but is not found by name", s.name, addr);

    uint64_t off, back;
    if (elf_file_vaddr_to_offset(ef, addr, &off) == 0)
        FUZZ_CHECK(elf_file_offset_to_vaddr(ef, off, &back) == 0,
                   "0x%" PRIx64 " -> offset 0x%" PRIx64 " has no address", addr, off);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    struct elf_file *ef = NULL;

    if (write_input(data, size) != 0)
        return 0;
    snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
    int err = elf_file_open(path, &ef);
    if (err) {
        FUZZ_CHECK(err == -ENOEXEC || err == -ENOMEM || err == -EFBIG, "open: %d", err);
        return 0;
    }

    (void)elf_file_type(ef);
    (void)elf_file_is_dynamic(ef);
    char hex[BUILD_ID_HEX];
    err = elf_file_build_id(ef, hex, sizeof(hex));
    FUZZ_CHECK(err == 0 || err == -ENOENT, "build id: %d", err);
    if (err == 0) {
        size_t n = strlen(hex);
        FUZZ_CHECK(n >= 2 && n % 2 == 0 && strspn(hex, "0123456789abcdef") == n, "build id \"%s\"",
                   hex);
        char small[8];
        int e2 = elf_file_build_id(ef, small, sizeof(small));
        FUZZ_CHECK(n + 1 <= sizeof(small) ? e2 == 0 : e2 == -ENOSPC,
                   "build id of %zu chars into 8 bytes: %d", n, e2);
    }

    for (size_t i = 0; i < sizeof(NAMES) / sizeof(NAMES[0]); i++) {
        struct elf_symbol s;
        for (int dyn = 0; dyn < 2; dyn++)
            if (elf_file_find_function(ef, NAMES[i], dyn, &s) == 0)
                check_symbol(ef, &s, NAMES[i], 0);
        FUZZ_CHECK(elf_file_exports_function(ef, NAMES[i]) ==
                       (elf_file_find_function(ef, NAMES[i], true, &s) == 0),
                   "exports(\"%s\") disagrees with find_function", NAMES[i]);
    }

    size_t n_needed = elf_file_needed_count(ef);
    for (size_t i = 0; i < n_needed; i++)
        FUZZ_CHECK(elf_file_needed(ef, i) != NULL, "needed %zu of %zu is NULL", i, n_needed);
    FUZZ_CHECK(elf_file_needed(ef, n_needed) == NULL, "needed past the end");

    /* Addresses: the entry point (e_entry), and the last 16 bytes of the input. */
    uint64_t entry = fuzz_u64_at(data, size, 24);
    uint64_t tail = size >= 16 ? fuzz_u64_at(data, size, size - 16) : 0;
    uint64_t tail2 = size >= 8 ? fuzz_u64_at(data, size, size - 8) : 0;
    uint64_t addrs[] = {0, 0x1000, entry, entry + 1, tail, tail2, UINT64_MAX};
    for (size_t i = 0; i < sizeof(addrs) / sizeof(addrs[0]); i++) {
        check_address(ef, addrs[i]);
        uint64_t v, o;
        if (elf_file_offset_to_vaddr(ef, addrs[i], &v) == 0)
            FUZZ_CHECK(elf_file_vaddr_to_offset(ef, v, &o) == 0,
                       "offset 0x%" PRIx64 " -> 0x%" PRIx64 " has no offset", addrs[i], v);
    }
    elf_file_close(ef);
    return 0;
}
