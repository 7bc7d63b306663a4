/*
 * probe_site.c - a minimal x86_64 decoder for the first instructions of
 * allocator functions, to put entry probes on instructions the kernel
 * emulates (see probe_site.h for the rules and why).
 */
#include "probe_site.h"

#include <string.h>

/* What a decoded instruction means for probe placement. */
enum insn_class {
    INSN_UNKNOWN = 0,   /* not decoded: stop here */
    INSN_SKIPPABLE,     /* straight-line, writes at most `dest` */
    INSN_EMULATED,      /* the kernel emulates it: a good probe site */
};

struct insn {
    size_t len;
    enum insn_class cls;
    int dest;           /* register written (0-15), or -1 */
};

/* x86_64 register numbers. */
enum { REG_RDX = 2, REG_RSP = 4, REG_RBP = 5, REG_RSI = 6, REG_RDI = 7 };

/*
 * The length of a ModRM operand (ModRM byte, SIB, displacement) at p, or 0
 * if it does not fit in n bytes. Sets *mod and the reg and rm fields.
 */
static size_t modrm_len(const uint8_t *p, size_t n, int *mod, int *reg, int *rm)
{
    if (n < 1)
        return 0;
    *mod = p[0] >> 6;
    *reg = (p[0] >> 3) & 7;
    *rm = p[0] & 7;
    size_t len = 1;
    if (*mod != 3 && *rm == 4)
        len++; /* SIB */
    if (*mod == 1)
        len += 1;
    else if (*mod == 2 || (*mod == 0 && *rm == 5))
        len += 4; /* disp32, or %rip-relative */
    else if (*mod == 0 && *rm == 4 && n >= 2 && (p[1] & 7) == 5)
        len += 4; /* SIB with no base: disp32 */
    return len <= n ? len : 0;
}

/* Decodes the instruction at p (n bytes available) into *in. */
static void decode(const uint8_t *p, size_t n, struct insn *in)
{
    memset(in, 0, sizeof(*in));
    in->dest = -1;
    if (n >= 4 && p[0] == 0xf3 && p[1] == 0x0f && p[2] == 0x1e && p[3] == 0xfa) {
        in->len = 4; /* endbr64: a no-op to us */
        in->cls = INSN_SKIPPABLE;
        return;
    }
    size_t i = 0;
    /* %fs/%gs overrides only change where memory is read (thread-locals);
     * a prefixed push or branch is not one the kernel emulates. */
    int segment = n > 0 && (p[0] == 0x64 || p[0] == 0x65);
    i += (size_t)segment;
    int rex = 0;
    if (i < n && (p[i] & 0xf0) == 0x40)
        rex = p[i++];
    if (i >= n)
        return;
    int rex_r = (rex & 4) ? 8 : 0, rex_b = (rex & 1) ? 8 : 0;
    uint8_t op = p[i++];
    int mod, reg, rm;
    size_t ml;

    if (op >= 0x50 && op <= 0x57) { /* push %reg */
        in->len = i;
        in->cls = segment ? INSN_UNKNOWN : INSN_EMULATED;
        return;
    }
    int plain = !rex && !segment;
    if (plain && ((op >= 0x70 && op <= 0x7f) || op == 0xeb)) { /* jcc/jmp rel8 */
        in->len = i + 1 <= n ? i + 1 : 0;
        in->cls = in->len ? INSN_EMULATED : INSN_UNKNOWN;
        return;
    }
    if (plain && (op == 0xe8 || op == 0xe9)) { /* call/jmp rel32 */
        in->len = i + 4 <= n ? i + 4 : 0;
        in->cls = in->len ? INSN_EMULATED : INSN_UNKNOWN;
        return;
    }
    if (plain && op == 0x0f && i < n && p[i] >= 0x80 && p[i] <= 0x8f) { /* jcc rel32 */
        in->len = i + 5 <= n ? i + 5 : 0;
        in->cls = in->len ? INSN_EMULATED : INSN_UNKNOWN;
        return;
    }
    if (plain && op == 0x90) { /* nop */
        in->len = i;
        in->cls = INSN_SKIPPABLE;
        return;
    }
    switch (op) {
    case 0x84: /* test r/m8, r8 */
    case 0x85: /* test r/m, r */
    case 0x38: /* cmp r/m8, r8 */
    case 0x39: /* cmp r/m, r */
    case 0x3a: /* cmp r8, r/m8 */
    case 0x3b: /* cmp r, r/m */
        ml = modrm_len(p + i, n - i, &mod, &reg, &rm);
        if (!ml)
            return;
        in->len = i + ml;
        in->cls = INSN_SKIPPABLE; /* reads only; sets flags */
        return;
    case 0x01: /* add r, r/m */
    case 0x09: /* or */
    case 0x21: /* and */
    case 0x29: /* sub */
    case 0x31: /* xor */
    case 0x89: /* mov r, r/m */
        ml = modrm_len(p + i, n - i, &mod, &reg, &rm);
        if (!ml || mod != 3)
            return; /* a memory destination: not skipped */
        in->len = i + ml;
        in->cls = INSN_SKIPPABLE;
        in->dest = rm + rex_b;
        return;
    case 0x03: /* add r/m, r */
    case 0x0b: /* or */
    case 0x23: /* and */
    case 0x2b: /* sub */
    case 0x33: /* xor */
    case 0x8b: /* mov r/m, r */
    case 0x8d: /* lea m, r */
        ml = modrm_len(p + i, n - i, &mod, &reg, &rm);
        if (!ml || (op == 0x8d && mod == 3))
            return;
        in->len = i + ml;
        in->cls = INSN_SKIPPABLE;
        in->dest = reg + rex_r;
        return;
    case 0x05: /* add/or/and/sub/xor %eax, imm32 */
    case 0x0d:
    case 0x25:
    case 0x2d:
    case 0x35:
    case 0x3d: /* cmp %eax, imm32 */
    case 0xa9: /* test %eax, imm32 */
        in->len = i + 4 <= n ? i + 4 : 0;
        in->cls = in->len ? INSN_SKIPPABLE : INSN_UNKNOWN;
        in->dest = (op == 0x3d || op == 0xa9) ? -1 : 0;
        return;
    case 0x81: /* group 1 with imm32 */
    case 0x83: /* group 1 with imm8 */
    case 0xc1: /* shifts by imm8 */
    case 0xd1: /* shifts by 1 */
        ml = modrm_len(p + i, n - i, &mod, &reg, &rm);
        if (!ml)
            return;
        in->len = i + ml + (op == 0x81 ? 4 : op == 0xd1 ? 0 : 1);
        if (in->len > n) {
            in->len = 0;
            return;
        }
        if ((op == 0x81 || op == 0x83) && reg == 7) {
            in->cls = INSN_SKIPPABLE; /* cmp: reads only */
            return;
        }
        if (mod != 3 || ((op == 0xc1 || op == 0xd1) && reg == 6)) {
            in->len = 0; /* a memory destination, or an undefined shift */
            return;
        }
        in->cls = INSN_SKIPPABLE;
        in->dest = rm + rex_b;
        return;
    default:
        return;
    }
}

/* Whether the kind's probe reads register `r` at its entry. */
static int protected_register(enum hp_kind kind, int r)
{
    if (r == REG_RSP || r == REG_RBP)
        return 1; /* the return address at (%rsp) and the frame chain */
    switch (kind) {
    case HP_MALLOC:
    case HP_VALLOC:
    case HP_FREE:
        return r == REG_RDI;
    case HP_ALIGNED_ALLOC:
        return r == REG_RSI;
    case HP_POSIX_MEMALIGN:
        return r == REG_RDI || r == REG_RDX;
    case HP_CALLOC:
    case HP_REALLOC:
        return r == REG_RDI || r == REG_RSI;
    default:
        return r == REG_RDI || r == REG_RSI || r == REG_RDX;
    }
}

/* Whether a byte pattern of a relative branch in code[0, len) may land in
 * (0, site]. Patterns are matched at every byte, not just at instruction
 * boundaries: a false match only keeps the probe at the entry. */
static int branch_lands_in_prefix(const uint8_t *code, size_t len, size_t site)
{
    for (size_t i = 0; i < len; i++) {
        int64_t target = -1;
        uint8_t b = code[i];
        if (((b >= 0x70 && b <= 0x7f) || b == 0xeb) && i + 2 <= len)
            target = (int64_t)(i + 2) + (int8_t)code[i + 1];
        else if ((b == 0xe9 || b == 0xe8) && i + 5 <= len)
            target = (int64_t)(i + 5) + (int32_t)(code[i + 1] | code[i + 2] << 8 |
                                                  code[i + 3] << 16 | (uint32_t)code[i + 4] << 24);
        else if (b == 0x0f && i + 6 <= len && code[i + 1] >= 0x80 && code[i + 1] <= 0x8f)
            target = (int64_t)(i + 6) + (int32_t)(code[i + 2] | code[i + 3] << 8 |
                                                  code[i + 4] << 16 | (uint32_t)code[i + 5] << 24);
        if (target > 0 && (uint64_t)target <= site)
            return 1;
    }
    return 0;
}

void probe_site_choose(const uint8_t *code, size_t len, enum hp_kind kind, int whole_function,
                       struct probe_site *out)
{
    out->offset = 0;
    out->emulated = 0;
    out->reason = "first instruction not decoded";
    size_t off = 0;
    for (int k = 0; k <= PROBE_SITE_MAX_SKIPPED && off < len; k++) {
        struct insn in;
        decode(code + off, len - off, &in);
        if (in.cls == INSN_EMULATED) {
            if (off > 0 && (!whole_function || branch_lands_in_prefix(code, len, off))) {
                out->reason = whole_function ? "a branch may land after the entry"
                                             : "function size unknown";
                return;
            }
            out->offset = off;
            out->emulated = 1;
            out->reason = off ? "first emulated instruction after a safe prefix"
                              : "entry instruction is emulated";
            return;
        }
        if (in.cls != INSN_SKIPPABLE || in.len == 0) {
            out->reason = "an instruction before the first emulated one is not decoded";
            return;
        }
        if (in.dest >= 0 && protected_register(kind, in.dest)) {
            out->reason = "the prefix writes a register the probe reads";
            return;
        }
        off += in.len;
    }
    out->reason = "no emulated instruction early in the function";
}
