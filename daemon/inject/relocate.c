/*
 * relocate.c - relocation of function prologues (see relocate.h), on the
 * Zydis decoder (Debian's libzydis-dev 4.0).
 *
 * Why Zydis rather than Capstone or our own decoder: relocation needs,
 * for every instruction, its exact length and where its displacement and
 * immediate bytes are and which of them are relative; Zydis decodes all of
 * x86-64 and reports exactly that (raw.disp, raw.imm[].is_relative) without
 * building text or operand lists, while Capstone 4 (Debian's) is slower,
 * keeps global option state, and exposes the raw layout only partly. A
 * hand-written decoder (probe_site.c decodes the few instructions a probe
 * site needs) cannot promise "every instruction of the function decodes".
 */
#include "relocate.h"

#include <errno.h>
#include <string.h>

#include <Zydis/Zydis.h>

/* Whether the instruction's memory operand is RIP-relative: mod 00, rm 101
 * in 64-bit mode, with or without REX.B. */
static int rip_relative(const ZydisDecodedInstruction *in)
{
    return (in->attributes & ZYDIS_ATTRIB_HAS_MODRM) && in->raw.modrm.mod == 0 &&
           in->raw.modrm.rm == 5 && in->raw.disp.size == 32;
}

/* The relative immediate of a branch, or NULL. */
static const struct ZydisDecodedInstructionRawImm_ *relative_imm(const ZydisDecodedInstruction *in)
{
    for (int i = 0; i < 2; i++)
        if (in->raw.imm[i].is_relative)
            return &in->raw.imm[i];
    return NULL;
}

/* Classifies one displaced instruction at `off`; NULL or the reason it
 * cannot move. */
static const char *classify(const ZydisDecodedInstruction *in, const uint8_t *bytes, uint64_t at,
                            struct relocated_insn *ri)
{
    const struct ZydisDecodedInstructionRawImm_ *imm = relative_imm(in);
    ri->kind = RELOC_COPY;
    if (imm) {
        ri->target = at + in->length + (uint64_t)imm->value.s;
        if (in->raw.prefix_count != 0)
            return "a prefixed relative branch in the prologue";
        if (in->mnemonic == ZYDIS_MNEMONIC_JMP) {
            ri->kind = RELOC_JMP;
            return NULL;
        }
        if (in->meta.category == ZYDIS_CATEGORY_COND_BR && (bytes[0] & 0xf0) == 0x70) {
            ri->kind = RELOC_JCC;
            ri->cond = bytes[0] & 0x0f;
            return NULL;
        }
        if (in->meta.category == ZYDIS_CATEGORY_COND_BR && bytes[0] == 0x0f &&
            (bytes[1] & 0xf0) == 0x80) {
            ri->kind = RELOC_JCC;
            ri->cond = bytes[1] & 0x0f;
            return NULL;
        }
        return "a call or loop in the prologue";
    }
    switch (in->meta.category) {
    case ZYDIS_CATEGORY_RET:
    case ZYDIS_CATEGORY_UNCOND_BR:
    case ZYDIS_CATEGORY_COND_BR:
    case ZYDIS_CATEGORY_CALL:
    case ZYDIS_CATEGORY_SYSTEM:
    case ZYDIS_CATEGORY_INTERRUPT:
        return "a return, indirect branch or system instruction in the prologue";
    default:
        break;
    }
    if (rip_relative(in)) {
        ri->kind = RELOC_RIP;
        ri->disp_offset = in->raw.disp.offset;
        ri->target = at + in->length + (uint64_t)in->raw.disp.value;
    }
    return NULL;
}

int relocate_plan(const uint8_t *code, size_t len, uint64_t func, struct relocation *r,
                  const char **why, size_t *at)
{
    ZydisDecoder dec;
    ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    memset(r, 0, sizeof(*r));
    r->func = func;
    *at = 0;
    if (len < RELOCATE_PATCH_LEN) {
        *why = "the function is shorter than a jump";
        return -EINVAL;
    }
    /* The prologue: whole instructions covering the jump. */
    size_t off = 0;
    while (off < RELOCATE_PATCH_LEN) {
        ZydisDecodedInstruction in;
        *at = off;
        if (ZYAN_FAILED(ZydisDecoderDecodeInstruction(&dec, NULL, code + off, len - off, &in))) {
            *why = "an instruction that does not decode";
            return -EINVAL;
        }
        struct relocated_insn *ri = &r->insns[r->ninsns];
        ri->offset = (uint8_t)off;
        ri->length = in.length;
        const char *bad = classify(&in, code + off, func + off, ri);
        int ends = ri->kind == RELOC_JMP;
        if (bad || (ends && off + in.length < RELOCATE_PATCH_LEN)) {
            *why = bad ? bad : "a jump before the end of the patched bytes";
            return -EINVAL;
        }
        r->ninsns++;
        off += in.length;
    }
    r->displaced = (uint8_t)off;
    memcpy(r->code, code, off);
    /* No branch of the function may land inside the displaced bytes. */
    for (size_t p = 0; p < len;) {
        ZydisDecodedInstruction in;
        *at = p;
        if (ZYAN_FAILED(ZydisDecoderDecodeInstruction(&dec, NULL, code + p, len - p, &in))) {
            *why = "an instruction of the function that does not decode";
            return -EINVAL;
        }
        const struct ZydisDecodedInstructionRawImm_ *imm = relative_imm(&in);
        if (imm) {
            uint64_t target = func + p + in.length + (uint64_t)imm->value.s;
            if (target > func && target < func + r->displaced) {
                *why = "a branch of the function lands in the patched bytes";
                return -EINVAL;
            }
        }
        p += in.length;
    }
    return 0;
}

static int put_rel32(uint8_t *where, uint64_t next_ip, uint64_t target)
{
    int64_t d = (int64_t)(target - next_ip);
    if (d != (int32_t)d)
        return -ERANGE;
    int32_t v = (int32_t)d;
    memcpy(where, &v, 4);
    return 0;
}

int relocate_jump(uint64_t from, uint64_t to, uint8_t out[RELOCATE_PATCH_LEN])
{
    out[0] = 0xe9;
    return put_rel32(out + 1, from + RELOCATE_PATCH_LEN, to);
}

int relocate_emit(const struct relocation *r, uint64_t tramp, uint8_t *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < r->ninsns; i++) {
        const struct relocated_insn *ri = &r->insns[i];
        const uint8_t *src = r->code + ri->offset;
        size_t need = ri->kind == RELOC_JMP ? 5 : ri->kind == RELOC_JCC ? 6 : ri->length;
        if (n + need > cap)
            return -ENOSPC;
        int e = 0;
        switch (ri->kind) {
        case RELOC_COPY:
            memcpy(out + n, src, ri->length);
            break;
        case RELOC_RIP:
            memcpy(out + n, src, ri->length);
            e = put_rel32(out + n + ri->disp_offset, tramp + n + ri->length, ri->target);
            break;
        case RELOC_JMP:
            e = relocate_jump(tramp + n, ri->target, out + n);
            break;
        case RELOC_JCC:
            out[n] = 0x0f;
            out[n + 1] = (uint8_t)(0x80 | ri->cond);
            e = put_rel32(out + n + 2, tramp + n + 6, ri->target);
            break;
        }
        if (e)
            return e;
        n += need;
    }
    if (n + RELOCATE_PATCH_LEN > cap)
        return -ENOSPC;
    if (relocate_jump(tramp + n, r->func + r->displaced, out + n))
        return -ERANGE;
    return (int)(n + RELOCATE_PATCH_LEN);
}
