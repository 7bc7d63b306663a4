/*
 * readelf_frames.c - parses `readelf --debug-dump=frames-interp` (see
 * readelf_frames.h). The output looks like:
 *
 *   00000000 0000000000000014 00000000 CIE "zR" cf=1 df=-8 ra=16
 *      LOC           CFA      ra
 *   0000000000000000 rsp+8    c-8
 *
 *   00000018 0000000000000024 0000001c FDE cie=00000000 pc=0000000000026000..0000000000026360
 *      LOC           CFA      rbx   rbp   ra
 *   0000000000026000 rsp+16   u     u     c-8
 *
 * Columns are registers the FDE mentions; a register held in another one
 * prints as "r9 (r9)", with a blank inside, which split_cols() glues back.
 */
#include "readelf_frames.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longest readelf line we parse; libc's widest (all 17 registers) is ~200 characters. */
#define LINE_MAX_LEN 1024
/* Columns of a readelf row: LOC, CFA and up to 17 registers, with room to spare. */
#define MAX_COLS 40
/* CIEs remembered per file: libc has 3, python3 a few; a test file far fewer. */
#define MAX_CIES 64

/* A CIE's initial row, for FDEs that add no rows of their own. */
struct fcie {
    int section; /* 0 .eh_frame, 1 .debug_frame: CIE offsets are per section */
    uint64_t off;
    struct frow init;
};

/* Splits a readelf row at blanks, gluing "(name)" onto the "rN" before it. */
static int split_cols(char *line, char *cols[MAX_COLS])
{
    int n = 0;
    for (char *tok = strtok(line, " \t\n"); tok; tok = strtok(NULL, " \t\n")) {
        if (tok[0] == '(' && n > 0)
            continue; /* "r9 (r9)": the register number says it already */
        if (n < MAX_COLS)
            cols[n++] = tok;
    }
    return n;
}

/* Appends a row, growing the array. */
static void frows_add(struct frows *rs, const struct frow *r)
{
    if (rs->n == rs->cap) {
        rs->cap = rs->cap ? 2 * rs->cap : 1024;
        rs->v = realloc(rs->v, rs->cap * sizeof(*rs->v));
        if (!rs->v)
            abort();
    }
    rs->v[rs->n++] = *r;
}

/* Every row `readelf --debug-dump=frames-interp` prints for `path`, .eh_frame and .debug_frame. */
int readelf_frames(const char *path, struct frows *out)
{
    char cmd[PATH_MAX + 64], line[LINE_MAX_LEN], *cols[MAX_COLS];
    struct fcie cies[MAX_CIES];
    struct fcie *cie = NULL; /* the CIE being read, or the current FDE's */
    size_t ncies = 0, fde_first = 0;
    int section = -1, col_rbp = -1, col_ra = -1;
    bool in_fde = false, in_cie = false;
    uint64_t off, cie_off, lo, hi, fde_lo = 0, fde_hi = 0, loc;

    memset(out, 0, sizeof(*out));
    snprintf(cmd, sizeof(cmd), "readelf --debug-dump=frames-interp '%s' 2>/dev/null", path);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -errno;
    for (;;) {
        bool eof = !fgets(line, sizeof(line), f);
        bool fde_line =
            !eof && sscanf(line, "%" SCNx64 " %*x %*x FDE cie=%" SCNx64 " pc=%" SCNx64 "..%" SCNx64,
                           &off, &cie_off, &lo, &hi) == 4;
        const char *cie_aug = eof ? NULL : strstr(line, " CIE \"");
        bool new_section = !eof && strstr(line, "Contents of the") != NULL;

        /* An FDE ends where the next entry or section begins; one that
         * printed no rows of its own runs on its CIE's initial row. */
        if (in_fde && (eof || fde_line || cie_aug || new_section)) {
            if (out->n == fde_first && cie) {
                struct frow r = cie->init;
                r.lo = fde_lo;
                r.hi = fde_hi;
                frows_add(out, &r);
            }
            in_fde = false;
        }
        if (eof)
            break;
        if (new_section) {
            section++;
        } else if (cie_aug) {
            in_cie = ncies < MAX_CIES && sscanf(line, "%" SCNx64, &off) == 1;
            if (in_cie) {
                cie = &cies[ncies++];
                memset(cie, 0, sizeof(*cie));
                cie->section = section;
                cie->off = off;
                for (const char *q = cie_aug + 6; *q && *q != '"'; q++)
                    cie->init.signal |= *q == 'S';
            }
        } else if (fde_line) {
            cie = NULL;
            for (size_t i = 0; i < ncies; i++)
                if (cies[i].section == section && cies[i].off == cie_off)
                    cie = &cies[i];
            in_fde = true;
            in_cie = false;
            fde_first = out->n;
            fde_lo = lo;
            fde_hi = hi;
        } else if (strstr(line, "   LOC ")) {
            int n = split_cols(line, cols);
            col_rbp = col_ra = -1;
            for (int i = 0; i < n; i++) {
                if (strcmp(cols[i], "rbp") == 0)
                    col_rbp = i;
                if (strcmp(cols[i], "ra") == 0)
                    col_ra = i;
            }
        } else if (strlen(line) > 17 && line[16] == ' ' && sscanf(line, "%16" SCNx64, &loc) == 1) {
            int n = split_cols(line, cols);
            struct frow r = {.lo = loc, .hi = fde_hi};
            snprintf(r.cfa, sizeof(r.cfa), "%s", n > 1 ? cols[1] : "?");
            snprintf(r.rbp, sizeof(r.rbp), "%s", col_rbp > 0 && col_rbp < n ? cols[col_rbp] : "u");
            snprintf(r.ra, sizeof(r.ra), "%s", col_ra > 0 && col_ra < n ? cols[col_ra] : "?");
            if (in_cie && cie) {
                r.signal = cie->init.signal;
                cie->init = r;
                in_cie = false; /* only the first row is the initial state */
            } else if (in_fde) {
                r.signal = cie && cie->init.signal;
                if (out->n > fde_first)
                    out->v[out->n - 1].hi = loc;
                frows_add(out, &r);
            }
        }
    }
    pclose(f);
    return out->n ? 0 : -ENOENT;
}

void frows_free(struct frows *rs)
{
    free(rs->v);
    memset(rs, 0, sizeof(*rs));
}
