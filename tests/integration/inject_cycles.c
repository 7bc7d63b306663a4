/*
 * inject_cycles.c - injects the in-process sampler into a running process
 * and takes its patches out again, N times, with the library heapprofd
 * uses (daemon/inject) but without BPF, for test_inprocess.py: after each
 * attach every entry must hold its jump, after each detach its original
 * bytes. Prints how long the process was stopped at each (median and
 * worst), which the benchmark reports too.
 *
 * usage: inject_cycles PID CYCLES
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "allocator.h"
#include "inject.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Whether every entry of `s` holds `jump` (1) or its original bytes (0). */
static int entries_hold(pid_t pid, const struct inject_state *s, int jump)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    int ok = 1;
    for (size_t i = 0; i < s->n && ok; i++) {
        uint8_t now[RELOCATE_PATCH_LEN];
        ok = fseeko(f, (off_t)s->p[i].addr, SEEK_SET) == 0 && fread(now, 1, sizeof(now), f) == sizeof(now) &&
             memcmp(now, jump ? s->p[i].jump : s->p[i].orig, sizeof(now)) == 0;
    }
    fclose(f);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: inject_cycles PID CYCLES\n");
        return 2;
    }
    pid_t pid = (pid_t)atoi(argv[1]);
    int cycles = atoi(argv[2]);
    char err[512];
    struct proc_maps maps;
    struct allocator_plan plan;
    if (proc_maps_read(pid, &maps) != 0 || allocator_resolve(pid, &maps, &plan, err, sizeof(err))) {
        fprintf(stderr, "inject_cycles: resolve the allocator of %d: %s\n", (int)pid, err);
        return 1;
    }
    struct inject_func f[HP_MAX_FUNCS];
    for (size_t i = 0; i < plan.n; i++)
        f[i] = (struct inject_func){.name = plan.funcs[i].name,
                                    .addr = plan.funcs[i].runtime_start,
                                    .code = plan.funcs[i].code,
                                    .len = plan.funcs[i].code_len};
    uint64_t *at = calloc((size_t)cycles, sizeof(*at)), *dt = calloc((size_t)cycles, sizeof(*dt));
    int rc = at && dt ? 0 : 1;
    unsigned seed = (unsigned)pid;
    for (int c = 0; c < cycles && rc == 0; c++) {
        struct inject_state s;
        int e = inject_attach(pid, f, plan.n, 4096, NULL, NULL, &s, err, sizeof(err));
        if (e) {
            fprintf(stderr, "inject_cycles: cycle %d: attach: %s\n", c, err);
            rc = 1;
            break;
        }
        at[c] = s.stopped_ns;
        if (!entries_hold(pid, &s, 1)) {
            fprintf(stderr, "inject_cycles: cycle %d: an entry is not patched\n", c);
            rc = 1;
        }
        struct timespec pause = {0, (long)(rand_r(&seed) % 20) * 1000000L};
        nanosleep(&pause, NULL);
        e = inject_detach(&s, err, sizeof(err));
        dt[c] = s.stopped_ns;
        if (e || !entries_hold(pid, &s, 0)) {
            fprintf(stderr, "inject_cycles: cycle %d: detach: %s\n", c,
                    e ? err : "an entry does not hold its original bytes");
            rc = 1;
        }
    }
    if (rc == 0) {
        qsort(at, (size_t)cycles, sizeof(*at), cmp_u64);
        qsort(dt, (size_t)cycles, sizeof(*dt), cmp_u64);
        printf("cycles %d functions %zu attach_stop_us median %.1f max %.1f "
               "detach_stop_us median %.1f max %.1f\n",
               cycles, plan.n, at[cycles / 2] / 1e3, at[cycles - 1] / 1e3, dt[cycles / 2] / 1e3,
               dt[cycles - 1] / 1e3);
    }
    free(at);
    free(dt);
    allocator_plan_free(&plan);
    proc_maps_free(&maps);
    return rc;
}
