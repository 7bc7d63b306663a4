/*
 * test_probe_site.c - checks where entry probes go (daemon/attach/probe_site.c) in
 * the allocators Debian ships (glibc, jemalloc, tcmalloc, mimalloc), with
 * objdump as the oracle for what instruction is at the chosen site, and on
 * hand-made code for the rules that keep a probe at the entry.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "elf_file.h"
#include "probe_site.h"

#define LIBDIR "/usr/lib/x86_64-linux-gnu/"

/* The mnemonic objdump prints for the instruction at `vaddr` of `path`. */
static void objdump_mnemonic(const char *path, uint64_t vaddr, char *out, size_t len)
{
    char cmd[512], line[512];
    snprintf(cmd, sizeof(cmd),
             "objdump -d --no-show-raw-insn --start-address=0x%llx --stop-address=0x%llx %s",
             (unsigned long long)vaddr, (unsigned long long)vaddr + 16, path);
    out[0] = '\0';
    FILE *f = popen(cmd, "r");
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        char *tab = strchr(line, '\t');
        unsigned long long a;
        if (!tab || sscanf(line, " %llx:", &a) != 1 || a != vaddr)
            continue;
        sscanf(tab + 1, "%63s", out);
        break;
    }
    pclose(f);
    (void)len;
}

/* Chooses the site of `func` in `lib` and checks it against objdump. Returns the offset. */
static long site_of(const char *lib, const char *func, enum hp_kind kind)
{
    struct elf_file *ef;
    struct elf_symbol sym;
    if (elf_file_open(lib, &ef) != 0) {
        fprintf(stderr, "cannot open %s: the test needs Debian's package of it\n", lib);
        check_failures++;
        return -1;
    }
    long result = -1;
    uint8_t code[4096];
    if (elf_file_find_function(ef, func, true, &sym) != 0 || sym.size == 0 ||
        sym.size > sizeof(code) || elf_file_read(ef, sym.vaddr, code, sym.size) != 0) {
        fprintf(stderr, "%s: %s not found or unreadable\n", lib, func);
        check_failures++;
        goto out;
    }
    struct probe_site site;
    probe_site_choose(code, sym.size, kind, 1, &site);
    char mnemonic[64];
    objdump_mnemonic(lib, sym.vaddr + site.offset, mnemonic, sizeof(mnemonic));
    fprintf(stderr, "  %s %s: +%zu %s (%s)\n", strrchr(lib, '/') + 1, func, site.offset,
            mnemonic, site.reason);
    /* The site is an instruction boundary (objdump printed one there)... */
    CHECK(mnemonic[0] != '\0');
    /* ...and, when we say so, one the kernel emulates. */
    if (site.emulated)
        CHECK(strncmp(mnemonic, "push", 4) == 0 || mnemonic[0] == 'j' ||
              strncmp(mnemonic, "call", 4) == 0);
    result = (long)site.offset;
out:
    elf_file_close(ef);
    return result;
}

static void glibc_free_is_probed_at_its_null_test_branch(void)
{
    CHECK_INT_EQ(site_of(LIBDIR "libc.so.6", "free", HP_FREE), 3);
}

static void glibc_malloc_is_probed_at_its_entry_push(void)
{
    CHECK_INT_EQ(site_of(LIBDIR "libc.so.6", "malloc", HP_MALLOC), 0);
    CHECK_INT_EQ(site_of(LIBDIR "libc.so.6", "realloc", HP_REALLOC), 0);
    CHECK_INT_EQ(site_of(LIBDIR "libc.so.6", "calloc", HP_CALLOC), 0);
}

static void jemalloc_malloc_is_probed_past_its_size_compare(void)
{
    /* cmp $0x1000,%rdi; ja ... */
    CHECK_INT_EQ(site_of(LIBDIR "libjemalloc.so.2", "malloc", HP_MALLOC), 7);
}

static void jemalloc_free_is_probed_past_its_address_arithmetic(void)
{
    /* Ten instructions on %rax, %rcx and %rdx (shr, and, add %fs:0, cmp) before jne. */
    long site = site_of(LIBDIR "libjemalloc.so.2", "free", HP_FREE);
    CHECK(site > 0);
}

static void tcmalloc_fast_paths_are_probed_at_their_first_branch(void)
{
    /* mov cache(%rip),%rax; test %rax,%rax; jne ... */
    CHECK_INT_EQ(site_of(LIBDIR "libtcmalloc_minimal.so.4", "malloc", HP_MALLOC), 10);
    CHECK_INT_EQ(site_of(LIBDIR "libtcmalloc_minimal.so.4", "free", HP_FREE), 10);
}

static void mimalloc_keeps_malloc_at_entry_where_the_prefix_writes_rdi(void)
{
    /* mov ..,%rax; mov %rdi,%rsi; mov %fs:(%rax),%rdi: the size is gone. */
    CHECK_INT_EQ(site_of(LIBDIR "libmimalloc.so.2", "malloc", HP_MALLOC), 0);
    /* mov %rdi,%rcx; test %rdi,%rdi; je ... */
    CHECK_INT_EQ(site_of(LIBDIR "libmimalloc.so.2", "free", HP_FREE), 6);
}

static void a_branch_into_the_prefix_keeps_the_entry(void)
{
    /* test %rdi,%rdi; je +0; ...; jmp back to the je (offset 3) */
    uint8_t code[] = {0x48, 0x85, 0xff, 0x74, 0x00, 0x90, 0xeb, 0xfb};
    struct probe_site s;
    probe_site_choose(code, sizeof(code), HP_FREE, 1, &s);
    CHECK_INT_EQ(s.offset, 0);
    CHECK_INT_EQ(s.emulated, 0);
    /* Without the back jump the je is chosen. */
    uint8_t ok[] = {0x48, 0x85, 0xff, 0x74, 0x02, 0x90, 0x90, 0xc3};
    probe_site_choose(ok, sizeof(ok), HP_FREE, 1, &s);
    CHECK_INT_EQ(s.offset, 3);
    CHECK_INT_EQ(s.emulated, 1);
}

static void a_prefix_that_writes_an_argument_or_the_stack_keeps_the_entry(void)
{
    struct probe_site s;
    /* mov %rax,%rsi (48 89 c6); jne: realloc's size is in %rsi. */
    uint8_t writes_rsi[] = {0x48, 0x89, 0xc6, 0x75, 0x00};
    probe_site_choose(writes_rsi, sizeof(writes_rsi), HP_REALLOC, 1, &s);
    CHECK_INT_EQ(s.offset, 0);
    /* The same is fine for free, which reads only %rdi. */
    probe_site_choose(writes_rsi, sizeof(writes_rsi), HP_FREE, 1, &s);
    CHECK_INT_EQ(s.offset, 3);
    /* sub $8,%rsp (48 83 ec 08) writes %rsp: not skipped. */
    uint8_t sub_rsp[] = {0x48, 0x83, 0xec, 0x08, 0x75, 0x00};
    probe_site_choose(sub_rsp, sizeof(sub_rsp), HP_MALLOC, 1, &s);
    CHECK_INT_EQ(s.offset, 0);
    /* mov %rdi,(%rsp) (48 89 3c 24) writes memory: not skipped. */
    uint8_t store[] = {0x48, 0x89, 0x3c, 0x24, 0x75, 0x00};
    probe_site_choose(store, sizeof(store), HP_MALLOC, 1, &s);
    CHECK_INT_EQ(s.offset, 0);
}

static void truncated_code_is_never_read_past_its_end(void)
{
    /* Every prefix length of a real-looking prologue, under ASan. */
    uint8_t code[] = {0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x8b, 0x05, 0x11, 0x22, 0x33,
                      0x44, 0x48, 0x85, 0xc0, 0x0f, 0x85, 0x10, 0x00, 0x00, 0x00};
    for (size_t n = 0; n <= sizeof(code); n++) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, code, n);
        struct probe_site s;
        probe_site_choose(copy, n, HP_MALLOC, 1, &s);
        CHECK(s.offset < (n ? n : 1));
        free(copy);
    }
}

int main(void)
{
    RUN_TEST(glibc_free_is_probed_at_its_null_test_branch);
    RUN_TEST(glibc_malloc_is_probed_at_its_entry_push);
    RUN_TEST(jemalloc_malloc_is_probed_past_its_size_compare);
    RUN_TEST(jemalloc_free_is_probed_past_its_address_arithmetic);
    RUN_TEST(tcmalloc_fast_paths_are_probed_at_their_first_branch);
    RUN_TEST(mimalloc_keeps_malloc_at_entry_where_the_prefix_writes_rdi);
    RUN_TEST(a_branch_into_the_prefix_keeps_the_entry);
    RUN_TEST(a_prefix_that_writes_an_argument_or_the_stack_keeps_the_entry);
    RUN_TEST(truncated_code_is_never_read_past_its_end);
    return check_exit_code();
}
