/*
 * visible_targets.c - the targets a caller may see (see visible_targets.h).
 */
#include "visible_targets.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

int visible_targets_get(struct daemon_ctx *ctx, const struct caller *who, bool with_totals,
                        struct visible_targets *out)
{
    *out = (struct visible_targets){0};
    if (!ctx->targets)
        return 0;
    out->info = calloc(HP_MAX_TARGETS, sizeof(*out->info));
    if (!out->info)
        return -ENOMEM;
    size_t all = targets_list(ctx->targets, out->info, HP_MAX_TARGETS);
    for (size_t i = 0; i < all && i < HP_MAX_TARGETS; i++)
        if (access_may_profile(who, out->info[i].pid) == 0)
            out->info[out->n++] = out->info[i];
    if (!with_totals)
        return 0;
    uint32_t *tgids = calloc(HP_MAX_TARGETS, sizeof(*tgids));
    out->totals = calloc(HP_MAX_TARGETS, sizeof(*out->totals));
    int e = tgids && out->totals ? 0 : -ENOMEM;
    for (size_t i = 0; i < out->n && e == 0; i++)
        tgids[i] = (uint32_t)out->info[i].pid;
    if (e == 0)
        e = bpf_state_process_totals(ctx->bpf, tgids, out->n, out->totals);
    free(tgids);
    if (e)
        visible_targets_free(out);
    return e;
}

void visible_targets_free(struct visible_targets *v)
{
    free(v->info);
    free(v->totals);
    *v = (struct visible_targets){0};
}
