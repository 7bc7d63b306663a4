/*
 * symbol_memo.c - an open-addressing table from addresses to copies of
 * their frames (see symbol_memo.h). Each remembered frame is one block: the
 * header, its lines, then their names.
 */
#include "symbol_memo.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Initial slots (a power of two); the table doubles at half full. */
#define MEMO_INITIAL_SLOTS 256

/* One line of a remembered frame; the names point into the same block. */
struct memo_line {
    const char *name, *system_name, *file;
    int64_t line;
};

/* One remembered frame, allocated as one block. */
struct memo_frame {
    uint64_t vaddr;
    bool from_dwarf;
    size_t n;
    struct memo_line lines[];
};

struct symbol_memo {
    struct memo_frame **slots;
    size_t nslots, used;
    uint64_t bytes;
};

struct symbol_memo *symbol_memo_new(void)
{
    struct symbol_memo *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->slots = calloc(MEMO_INITIAL_SLOTS, sizeof(*m->slots));
    if (!m->slots) {
        free(m);
        return NULL;
    }
    m->nslots = MEMO_INITIAL_SLOTS;
    m->bytes = MEMO_INITIAL_SLOTS * sizeof(*m->slots);
    return m;
}

/* Forgets every frame, keeping the table. */
static void forget_all(struct symbol_memo *m)
{
    for (size_t i = 0; i < m->nslots; i++) {
        free(m->slots[i]);
        m->slots[i] = NULL;
    }
    m->used = 0;
    m->bytes = m->nslots * sizeof(*m->slots);
}

void symbol_memo_free(struct symbol_memo *m)
{
    if (!m)
        return;
    forget_all(m);
    free(m->slots);
    free(m);
}

/* The slot for `vaddr` in a table of n slots: its frame's, or an empty one. */
static size_t slot_of(struct memo_frame **slots, size_t n, uint64_t vaddr)
{
    size_t i = (size_t)((vaddr * 0x9e3779b97f4a7c15ULL) >> 17) & (n - 1);
    while (slots[i] && slots[i]->vaddr != vaddr)
        i = (i + 1) & (n - 1);
    return i;
}

int symbol_memo_get(const struct symbol_memo *m, uint64_t vaddr, struct sym_frame *out)
{
    const struct memo_frame *f = m->slots[slot_of(m->slots, m->nslots, vaddr)];
    out->n = 0;
    out->from_dwarf = false;
    if (!f)
        return -ENOENT;
    for (size_t i = 0; i < f->n; i++) {
        struct sym_line *l = &out->lines[i];
        l->name = strdup(f->lines[i].name);
        l->system_name = strdup(f->lines[i].system_name);
        l->file = f->lines[i].file;
        l->line = f->lines[i].line;
        out->n++;
        if (!l->name || !l->system_name) {
            sym_frame_free(out);
            return -ENOMEM;
        }
    }
    out->from_dwarf = f->from_dwarf;
    return 0;
}

/* Doubles the table; 0 or -ENOMEM. */
static int grow(struct symbol_memo *m)
{
    size_t n = m->nslots * 2;
    struct memo_frame **slots = calloc(n, sizeof(*slots));
    if (!slots)
        return -ENOMEM;
    for (size_t i = 0; i < m->nslots; i++)
        if (m->slots[i])
            slots[slot_of(slots, n, m->slots[i]->vaddr)] = m->slots[i];
    free(m->slots);
    m->slots = slots;
    m->bytes += (n - m->nslots) * sizeof(*slots);
    m->nslots = n;
    return 0;
}

int symbol_memo_put(struct symbol_memo *m, uint64_t vaddr, const struct sym_frame *f)
{
    size_t size = sizeof(struct memo_frame) + f->n * sizeof(struct memo_line);
    for (size_t i = 0; i < f->n; i++)
        size += strlen(f->lines[i].name) + strlen(f->lines[i].system_name) + 2;
    if (m->bytes + size > SYMBOL_MEMO_MAX_BYTES)
        forget_all(m);
    if (2 * (m->used + 1) > m->nslots) {
        /* A table that would outgrow the bound starts over instead. */
        if (m->bytes + m->nslots * sizeof(*m->slots) + size > SYMBOL_MEMO_MAX_BYTES)
            forget_all(m);
        else if (grow(m) != 0)
            return -ENOMEM;
    }
    struct memo_frame *mf = malloc(size);
    if (!mf)
        return -ENOMEM;
    mf->vaddr = vaddr;
    mf->from_dwarf = f->from_dwarf;
    mf->n = f->n;
    char *s = (char *)&mf->lines[f->n];
    for (size_t i = 0; i < f->n; i++) {
        size_t a = strlen(f->lines[i].name) + 1, b = strlen(f->lines[i].system_name) + 1;
        mf->lines[i] = (struct memo_line){.name = memcpy(s, f->lines[i].name, a),
                                          .system_name = memcpy(s + a, f->lines[i].system_name, b),
                                          .file = f->lines[i].file,
                                          .line = f->lines[i].line};
        s += a + b;
    }
    size_t slot = slot_of(m->slots, m->nslots, vaddr);
    if (m->slots[slot]) { /* remembered already: keep the older copy */
        free(mf);
        return 0;
    }
    m->slots[slot] = mf;
    m->used++;
    m->bytes += size;
    return 0;
}

uint64_t symbol_memo_bytes(const struct symbol_memo *m)
{
    return m->bytes;
}
