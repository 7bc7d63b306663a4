/*
 * dw_cursor.c - bounded reads of DWARF call frame encodings (see dw_cursor.h).
 */
#include "dw_cursor.h"

#include <dwarf.h>
#include <stddef.h>

/* A LEB128 longer than this is malformed: 10 bytes carry 64 bits. */
#define LEB128_MAX_BYTES 10

uint8_t dw_u8(struct dw_cursor *c)
{
    if (c->p >= c->end) {
        c->bad = true;
        return 0;
    }
    return *c->p++;
}

uint64_t dw_le(struct dw_cursor *c, unsigned n)
{
    uint64_t v = 0;
    if ((uint64_t)(c->end - c->p) < n) {
        c->bad = true;
        return 0;
    }
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)c->p[i] << (8 * i);
    c->p += n;
    return v;
}

/* A LEB128, sign-extended from its last byte when `is_signed`. */
static uint64_t dw_leb(struct dw_cursor *c, bool is_signed)
{
    uint64_t v = 0;
    for (unsigned i = 0, shift = 0; i < LEB128_MAX_BYTES; i++, shift += 7) {
        uint8_t b = dw_u8(c);
        if (c->bad)
            return 0;
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            if (is_signed && shift + 7 < 64 && (b & 0x40))
                v |= ~(uint64_t)0 << (shift + 7);
            return v;
        }
    }
    c->bad = true;
    return 0;
}

uint64_t dw_uleb(struct dw_cursor *c)
{
    return dw_leb(c, false);
}

int64_t dw_sleb(struct dw_cursor *c)
{
    return (int64_t)dw_leb(c, true);
}

const uint8_t *dw_block(struct dw_cursor *c, uint64_t len)
{
    const uint8_t *start = c->p;
    if ((uint64_t)(c->end - c->p) < len) {
        c->bad = true;
        return NULL;
    }
    c->p += len;
    return start;
}

/* The value of a fixed-size DW_EH_PE_* format, sign-extended where it is signed. */
static uint64_t fixed_size(struct dw_cursor *c, uint8_t format, unsigned n)
{
    uint64_t v = dw_le(c, n);
    if ((format & DW_EH_PE_signed) && n < 8 && (v >> (8 * n - 1)) & 1)
        v |= ~(uint64_t)0 << (8 * n);
    return v;
}

uint64_t dw_encoded(struct dw_cursor *c, uint8_t enc, uint64_t field_vaddr)
{
    uint64_t v;
    switch (enc & 0x0f) {
    case DW_EH_PE_absptr: /* 8 bytes: we only read ELFCLASS64 */
    case DW_EH_PE_udata8:
    case DW_EH_PE_sdata8:
        v = fixed_size(c, enc, 8);
        break;
    case DW_EH_PE_udata4:
    case DW_EH_PE_sdata4:
        v = fixed_size(c, enc, 4);
        break;
    case DW_EH_PE_udata2:
    case DW_EH_PE_sdata2:
        v = fixed_size(c, enc, 2);
        break;
    case DW_EH_PE_uleb128:
        v = dw_uleb(c);
        break;
    case DW_EH_PE_sleb128:
        v = (uint64_t)dw_sleb(c);
        break;
    default:
        c->bad = true;
        return 0;
    }
    switch (enc & 0x70) {
    case DW_EH_PE_absptr:
        return v;
    case DW_EH_PE_pcrel:
        return v + field_vaddr; /* unsigned: wraps, and the result is range-checked later */
    default: /* textrel, datarel, funcrel, aligned: not used for x86_64 FDE addresses */
        c->bad = true;
        return 0;
    }
}
