/*
 * exited_profiles.c - keeps the last profiles of exited processes for a
 * while (see exited_profiles.h).
 */
#include "exited_profiles.h"

#include <errno.h>
#include <string.h>

#include "clock.h"

/* Monotonic seconds, the unit of EXITED_KEEP_SECONDS. */
static time_t now_seconds(void)
{
    return (time_t)(monotonic_ns() / 1000000000u);
}

void exited_profiles_init(struct exited_profiles *x)
{
    memset(x, 0, sizeof(*x));
    pthread_mutex_init(&x->lock, NULL);
}

/* Empties an entry. */
static void clear_entry(struct exited_entry *e)
{
    for (int f = 0; f < EXITED_FORMS; f++)
        pprof_buf_free(&e->forms[f]);
    pprof_free(e->profile);
    e->profile = NULL;
    e->pid = 0;
    process_facts_free(&e->facts);
}

void exited_profiles_destroy(struct exited_profiles *x)
{
    for (size_t i = 0; i < EXITED_MAX; i++)
        clear_entry(&x->v[i]);
    pthread_mutex_destroy(&x->lock);
}

/* Encodes `p` in every form; the default sample type is set per form. */
static int encode_forms(struct pprof_profile *p, struct pprof_buf forms[EXITED_FORMS])
{
    static const struct {
        enum exited_form form;
        const char *default_type;
    } protos[] = {{EXITED_HEAP_PROTO, "inuse_space"}, {EXITED_ALLOCS_PROTO, "alloc_space"}};
    int e = 0;
    for (size_t i = 0; i < sizeof(protos) / sizeof(protos[0]) && e == 0; i++) {
        struct pprof_buf raw = {0};
        e = pprof_set_default_sample_type(p, protos[i].default_type);
        if (e == 0)
            e = pprof_encode(p, &raw);
        if (e == 0)
            e = pprof_gzip(raw.data, raw.len, &forms[protos[i].form]);
        pprof_buf_free(&raw);
    }
    if (e == 0)
        e = pprof_write_heap_text(p, &forms[EXITED_TEXT]);
    return e;
}

int exited_profiles_put(struct exited_profiles *x, pid_t pid, const struct process_facts *facts,
                        struct pprof_profile *p)
{
    struct pprof_buf forms[EXITED_FORMS] = {{0}};
    struct process_facts copy;
    int e = process_facts_copy(&copy, facts);
    if (e == 0)
        e = encode_forms(p, forms); /* outside the lock: encoding takes a while */
    if (e) {
        process_facts_free(&copy); /* empty if the copy failed */
        for (int f = 0; f < EXITED_FORMS; f++)
            pprof_buf_free(&forms[f]);
        return e;
    }
    pthread_mutex_lock(&x->lock);
    time_t now = now_seconds();
    /* The pid's own entry if it has one (a process let go while idle is
     * kept again at its exit), so that a pid is never kept twice; else a
     * free or expired one. */
    size_t slot = EXITED_MAX;
    for (size_t i = 0; i < EXITED_MAX && slot == EXITED_MAX; i++)
        if (x->v[i].pid == pid)
            slot = i;
    for (size_t i = 0; i < EXITED_MAX && slot == EXITED_MAX; i++)
        if (x->v[i].pid == 0 || now - x->v[i].exited_at > EXITED_KEEP_SECONDS)
            slot = i;
    if (slot == EXITED_MAX) {
        slot = x->next; /* all taken and fresh: the oldest written goes */
        x->next = (x->next + 1) % EXITED_MAX;
    }
    clear_entry(&x->v[slot]);
    x->v[slot].pid = pid;
    x->v[slot].facts = copy;
    x->v[slot].exited_at = now;
    memcpy(x->v[slot].forms, forms, sizeof(forms));
    x->v[slot].profile = p;
    pthread_mutex_unlock(&x->lock);
    return 0;
}

/* The live entry of `pid` (an expired one is cleared); NULL if none. Lock held. */
static struct exited_entry *find_locked(struct exited_profiles *x, pid_t pid)
{
    time_t now = now_seconds();
    for (size_t i = 0; i < EXITED_MAX; i++) {
        struct exited_entry *en = &x->v[i];
        if (en->pid != pid)
            continue;
        if (now - en->exited_at > EXITED_KEEP_SECONDS) {
            clear_entry(en);
            return NULL;
        }
        return en;
    }
    return NULL;
}

bool exited_profiles_has(struct exited_profiles *x, pid_t pid, uint64_t start_time)
{
    pthread_mutex_lock(&x->lock);
    struct exited_entry *en = find_locked(x, pid);
    bool has = en && en->facts.start_time == start_time;
    pthread_mutex_unlock(&x->lock);
    return has;
}

uint64_t exited_profiles_start_time(struct exited_profiles *x, pid_t pid)
{
    pthread_mutex_lock(&x->lock);
    struct exited_entry *en = find_locked(x, pid);
    uint64_t start_time = en ? en->facts.start_time : 0;
    pthread_mutex_unlock(&x->lock);
    return start_time;
}

int exited_profiles_get(struct exited_profiles *x, pid_t pid, enum exited_form form,
                        struct pprof_buf *out)
{
    int e = -ENOENT;
    pthread_mutex_lock(&x->lock);
    struct exited_entry *en = find_locked(x, pid);
    if (en)
        e = pprof_buf_append(out, en->forms[form].data ? en->forms[form].data : (uint8_t *)"",
                             en->forms[form].len);
    pthread_mutex_unlock(&x->lock);
    return e;
}

int exited_profiles_write(struct exited_profiles *x, pid_t pid,
                          int (*write)(const struct pprof_profile *p, void *arg,
                                       struct pprof_buf *out),
                          void *arg, struct pprof_buf *out)
{
    int e = -ENOENT;
    pthread_mutex_lock(&x->lock);
    struct exited_entry *en = find_locked(x, pid);
    if (en && en->profile)
        e = write(en->profile, arg, out);
    pthread_mutex_unlock(&x->lock);
    return e;
}

int exited_profiles_each(struct exited_profiles *x,
                         int (*visit)(pid_t pid, const struct process_facts *facts,
                                      const struct pprof_profile *p, time_t exited_at, void *arg),
                         void *arg)
{
    int r = 0;
    pthread_mutex_lock(&x->lock);
    time_t now = now_seconds();
    for (size_t i = 0; i < EXITED_MAX && r == 0; i++) {
        struct exited_entry *en = &x->v[i];
        if (en->pid && now - en->exited_at > EXITED_KEEP_SECONDS)
            clear_entry(en);
        else if (en->pid && en->profile)
            r = visit(en->pid, &en->facts, en->profile, en->exited_at, arg);
    }
    pthread_mutex_unlock(&x->lock);
    return r;
}
