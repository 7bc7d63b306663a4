/*
 * row_index.c - the stack ids of each process's count rows (see
 * row_index.h). A list per process, found by a linear search: there are
 * at most a few thousand processes with rows (HP_MAX_SHARES), and a search
 * costs far less than the one system call a row read costs.
 */
#include "row_index.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "array_grow.h"

void row_index_init(struct row_index *ri)
{
    memset(ri, 0, sizeof(*ri));
    pthread_mutex_init(&ri->lock, NULL);
}

/* Frees the lists of `lists[0..n)` and the array. */
static void free_lists(struct row_list *lists, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(lists[i].ids);
    free(lists);
}

void row_index_destroy(struct row_index *ri)
{
    free_lists(ri->lists, ri->n);
    pthread_mutex_destroy(&ri->lock);
    memset(ri, 0, sizeof(*ri));
}

int row_list_add(struct row_list *l, uint64_t id)
{
    uint64_t *nv = array_grow(l->ids, &l->cap, l->n + 1, sizeof(*nv), 64);
    if (!nv)
        return -ENOMEM;
    l->ids = nv;
    l->ids[l->n++] = id;
    return 0;
}

/* Under the lock: the list of `tgid`, or NULL. */
static struct row_list *find(struct row_index *ri, uint32_t tgid)
{
    for (size_t i = 0; i < ri->n; i++)
        if (ri->lists[i].tgid == tgid)
            return &ri->lists[i];
    return NULL;
}

int row_index_get(struct row_index *ri, uint32_t tgid, size_t rows, uint64_t **ids, size_t *n)
{
    int e = -ENOENT;
    pthread_mutex_lock(&ri->lock);
    const struct row_list *l = find(ri, tgid);
    if (l && l->n >= rows) {
        *ids = malloc((l->n ? l->n : 1) * sizeof(**ids));
        e = *ids ? 0 : -ENOMEM;
        if (e == 0) {
            memcpy(*ids, l->ids, l->n * sizeof(**ids));
            *n = l->n;
        }
    }
    pthread_mutex_unlock(&ri->lock);
    return e;
}

void row_index_replace(struct row_index *ri, struct row_list *lists, size_t n)
{
    pthread_mutex_lock(&ri->lock);
    struct row_list *old = ri->lists;
    size_t nold = ri->n;
    ri->lists = lists;
    ri->n = ri->cap = n;
    pthread_mutex_unlock(&ri->lock);
    free_lists(old, nold);
}

void row_index_forget(struct row_index *ri, uint32_t tgid)
{
    pthread_mutex_lock(&ri->lock);
    struct row_list *l = find(ri, tgid);
    uint64_t *ids = NULL;
    if (l) {
        ids = l->ids;
        *l = ri->lists[--ri->n];
    }
    pthread_mutex_unlock(&ri->lock);
    free(ids);
}
