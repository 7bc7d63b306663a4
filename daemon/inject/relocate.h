/*
 * relocate.h - moves the first instructions of a function elsewhere, so
 * that its entry can become a 5-byte jump into the sampler while the
 * displaced instructions run from a trampoline that then jumps back.
 *
 * Relocation is refused (with the reason) unless it is certain: every
 * instruction of the function must decode, no branch inside it may land in
 * the displaced bytes past the entry, and each displaced instruction must
 * be one we know how to move (plain, RIP-relative operand, relative jump).
 */
#ifndef HEAPPROF_RELOCATE_H
#define HEAPPROF_RELOCATE_H

#include <stddef.h>
#include <stdint.h>

/* The size of the jump written at a patched entry (jmp rel32). */
#define RELOCATE_PATCH_LEN 5
/* The most bytes a prologue's instructions may take: the jump, plus the
 * longest x86 instruction that may straddle it. */
#define RELOCATE_MAX_DISPLACED (RELOCATE_PATCH_LEN + 15)
#define RELOCATE_MAX_INSNS RELOCATE_MAX_DISPLACED

/* One displaced instruction. */
struct relocated_insn {
    uint8_t offset;      /* from the function's entry */
    uint8_t length;
    uint8_t kind;        /* RELOC_COPY, RELOC_RIP, RELOC_JMP, RELOC_JCC */
    uint8_t disp_offset; /* RELOC_RIP: where its disp32 is in the instruction */
    uint8_t cond;        /* RELOC_JCC: the condition code (0-15) */
    uint64_t target;     /* RELOC_RIP, RELOC_JMP, RELOC_JCC: absolute address */
};

enum { RELOC_COPY, RELOC_RIP, RELOC_JMP, RELOC_JCC };

/* A function's entry, ready to be relocated. */
struct relocation {
    uint64_t func;       /* the function's address in the process */
    uint8_t displaced;   /* bytes moved: whole instructions, >= RELOCATE_PATCH_LEN */
    uint8_t code[RELOCATE_MAX_DISPLACED]; /* the original bytes */
    size_t ninsns;
    struct relocated_insn insns[RELOCATE_MAX_INSNS];
};

/*
 * Plans the relocation of the function at `func` whose whole code is
 * `code` (`len` bytes, its symbol's size). Returns 0, or -EINVAL with the
 * reason in `why` (a static string) and the offending offset in `*at`.
 */
int relocate_plan(const uint8_t *code, size_t len, uint64_t func, struct relocation *r,
                  const char **why, size_t *at);

/*
 * Writes the trampoline for `r` placed at address `tramp`: the displaced
 * instructions, fixed up for their new place, and a jump back to the rest
 * of the function. Returns its length, or -ERANGE when a displacement does
 * not fit in 32 bits from there, -ENOSPC when it exceeds `cap`.
 */
int relocate_emit(const struct relocation *r, uint64_t tramp, uint8_t *out, size_t cap);

/* Writes at `out` the 5-byte jump from `from` to `to`; -ERANGE if too far. */
int relocate_jump(uint64_t from, uint64_t to, uint8_t out[RELOCATE_PATCH_LEN]);

#endif
