/*
 * test_relocate.c - checks the relocation of function prologues
 * (daemon/inject/relocate.c): on hand-made code for each rule (plain,
 * RIP-relative, short and long conditional jumps, refusals), by running
 * relocated code and comparing with the original, and on every allocator
 * entry of Debian's glibc, jemalloc, tcmalloc and mimalloc, which must all
 * relocate.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "check.h"
#include "elf_file.h"
#include "relocate.h"

#define LIBDIR "/usr/lib/x86_64-linux-gnu/"

static int plan(const uint8_t *code, size_t len, uint64_t at, struct relocation *r, const char **why)
{
    size_t off;
    return relocate_plan(code, len, at, r, why, &off);
}

static void plain_prologue_moves_whole_instructions(void)
{
    /* push %r12; push %rbp; push %rbx; sub $0x20,%rsp; ret */
    static const uint8_t code[] = {0x41, 0x54, 0x55, 0x53, 0x48, 0x83, 0xec, 0x20, 0xc3};
    struct relocation r;
    const char *why = NULL;
    CHECK_INT_EQ(plan(code, sizeof(code), 0x400000, &r, &why), 0);
    CHECK_INT_EQ(r.displaced, 8);
    uint8_t out[64];
    int n = relocate_emit(&r, 0x500000, out, sizeof(out));
    CHECK_INT_EQ(n, 8 + 5);
    CHECK(memcmp(out, code, 8) == 0);
    CHECK_INT_EQ(out[8], 0xe9);
    int32_t rel;
    memcpy(&rel, out + 9, 4);
    CHECK_U64_EQ(0x500000 + 13 + (int64_t)rel, 0x400008);
}

static void short_conditional_jump_becomes_long(void)
{
    /* test %rdi,%rdi; je +0x10; ... (glibc's free starts so, with a long je) */
    uint8_t code[32];
    memset(code, 0x90, sizeof(code));
    memcpy(code, (uint8_t[]){0x48, 0x85, 0xff, 0x74, 0x10}, 5);
    code[31] = 0xc3;
    struct relocation r;
    const char *why = NULL;
    CHECK_INT_EQ(plan(code, sizeof(code), 0x400000, &r, &why), 0);
    CHECK_INT_EQ(r.displaced, 5);
    uint8_t out[64];
    int n = relocate_emit(&r, 0x600000, out, sizeof(out));
    CHECK_INT_EQ(n, 3 + 6 + 5);
    CHECK_INT_EQ(out[3], 0x0f);
    CHECK_INT_EQ(out[4], 0x84);
    int32_t rel;
    memcpy(&rel, out + 5, 4);
    CHECK_U64_EQ(0x600000 + 9 + (int64_t)rel, 0x400000 + 5 + 0x10);
}

static void rip_relative_operand_keeps_its_target(void)
{
    /* cmpb $0x0,0x140201(%rip); push %r12 (glibc's posix_memalign) */
    static const uint8_t code[] = {0x80, 0x3d, 0x01, 0x02, 0x14, 0x00, 0x00, 0x41, 0x54, 0xc3};
    struct relocation r;
    const char *why = NULL;
    CHECK_INT_EQ(plan(code, sizeof(code), 0x7f0000000000ULL, &r, &why), 0);
    CHECK_INT_EQ(r.displaced, 7);
    uint8_t out[64];
    uint64_t tramp = 0x7f0000000000ULL - 0x100000;
    CHECK_INT_EQ(relocate_emit(&r, tramp, out, sizeof(out)), 7 + 5);
    int32_t disp;
    memcpy(&disp, out + 2, 4);
    CHECK_U64_EQ(tramp + 7 + (int64_t)disp, 0x7f0000000000ULL + 7 + 0x140201);
    CHECK_INT_EQ(out[6], 0x00); /* the immediate after the displacement stays */
    /* Too far for a rel32 from the trampoline: refused, not wrapped. */
    CHECK_INT_EQ(relocate_emit(&r, 0x1000, out, sizeof(out)), -ERANGE);
}

static void unsafe_prologues_are_refused(void)
{
    struct relocation r;
    const char *why = NULL;
    /* A branch later in the function lands at +1, inside the patched bytes. */
    static const uint8_t into[] = {0x55, 0x48, 0x89, 0xe5, 0x90, 0x90, 0xeb, 0xf9, 0xc3};
    CHECK_INT_EQ(plan(into, sizeof(into), 0x1000, &r, &why), -EINVAL);
    CHECK(why && strstr(why, "lands in the patched bytes"));
    /* A call in the prologue. */
    static const uint8_t call[] = {0xe8, 0, 0, 0, 0, 0xc3};
    CHECK_INT_EQ(plan(call, sizeof(call), 0x1000, &r, &why), -EINVAL);
    /* A return before five bytes. */
    static const uint8_t ret[] = {0x31, 0xc0, 0xc3, 0x90, 0x90, 0x90};
    CHECK_INT_EQ(plan(ret, sizeof(ret), 0x1000, &r, &why), -EINVAL);
    /* Shorter than the jump. */
    CHECK_INT_EQ(plan(ret, 3, 0x1000, &r, &why), -EINVAL);
    /* Bytes that do not decode. */
    static const uint8_t bad[] = {0x0f, 0x0b, 0x90, 0x90, 0x90, 0x06, 0xc3};
    CHECK_INT_EQ(plan(bad, sizeof(bad), 0x1000, &r, &why), -EINVAL);
}

/* long f(long x) { return x ? x + 1 : -1; } with a short je at its entry. */
static const uint8_t sample_fn[] = {
    0x48, 0x85, 0xff,             /* test %rdi,%rdi */
    0x74, 0x05,                   /* je +5 */
    0x48, 0x8d, 0x47, 0x01,       /* lea 0x1(%rdi),%rax */
    0xc3,                         /* ret */
    0x48, 0xc7, 0xc0, 0xff, 0xff, 0xff, 0xff, /* mov $-1,%rax */
    0xc3,
};

static void relocated_code_runs_like_the_original(void)
{
    uint8_t *page = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(page != MAP_FAILED);
    if (page == MAP_FAILED)
        return;
    memcpy(page, sample_fn, sizeof(sample_fn));
    struct relocation r;
    const char *why = NULL;
    CHECK_INT_EQ(plan(page, sizeof(sample_fn), (uint64_t)page, &r, &why), 0);
    int n = relocate_emit(&r, (uint64_t)(page + 4096), page + 4096, 64);
    CHECK(n > 0);
    CHECK(mprotect(page, 8192, PROT_READ | PROT_EXEC) == 0);
    long (*orig)(long) = (long (*)(long))(void *)page;
    long (*moved)(long) = (long (*)(long))(void *)(page + 4096);
    for (long x = -2; x <= 2; x++)
        CHECK_INT_EQ(moved(x), orig(x));
    munmap(page, 8192);
}

/* Every allocator entry point of `lib` that it defines relocates. */
static void entries_of_relocate(const char *lib)
{
    static const char *const names[] = {"malloc", "calloc", "realloc", "reallocarray",
                                        "posix_memalign", "aligned_alloc", "memalign", "valloc",
                                        "pvalloc", "free", "free_sized", "free_aligned_sized"};
    struct elf_file *ef;
    if (elf_file_open(lib, &ef) != 0) {
        fprintf(stderr, "%s: cannot open (is it installed? scripts/install-deps.sh)\n", lib);
        check_failures++;
        return;
    }
    int found = 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        struct elf_symbol sym;
        if (elf_file_find_function(ef, names[i], true, &sym) != 0)
            continue;
        found++;
        uint8_t *code = malloc(sym.size);
        CHECK(code && elf_file_read(ef, sym.vaddr, code, sym.size) == 0);
        struct relocation r;
        const char *why = "";
        size_t at = 0;
        int e = code ? relocate_plan(code, sym.size, sym.vaddr, &r, &why, &at) : -ENOMEM;
        if (e != 0) {
            fprintf(stderr, "%s:%s does not relocate: %s at +%zu\n", lib, names[i], why, at);
            check_failures++;
        }
        free(code);
    }
    CHECK(found >= 2);
    elf_file_close(ef);
}

int main(void)
{
    RUN_TEST(plain_prologue_moves_whole_instructions);
    RUN_TEST(short_conditional_jump_becomes_long);
    RUN_TEST(rip_relative_operand_keeps_its_target);
    RUN_TEST(unsafe_prologues_are_refused);
    RUN_TEST(relocated_code_runs_like_the_original);
    RUN_TEST_WITH(entries_of_relocate, LIBDIR "libc.so.6");
    RUN_TEST_WITH(entries_of_relocate, LIBDIR "libjemalloc.so.2");
    RUN_TEST_WITH(entries_of_relocate, LIBDIR "libtcmalloc_minimal.so.4");
    RUN_TEST_WITH(entries_of_relocate, LIBDIR "libmimalloc.so.2");
    return check_exit_code();
}
