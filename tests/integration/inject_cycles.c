/*
 * inject_cycles.c - injects the in-process sampler into a running process
 * and takes it out again, N times, with the library heapprofd uses
 * (daemon/inject) but without BPF, for test_inprocess.py: after each
 * attach some relocation slots must point at the sampler, after each
 * detach the installer must have given back as many as it took, and the
 * allocator's code must hold the same bytes throughout (no code is ever
 * written). Prints how long a thread was stopped at each (median and
 * worst), which the benchmark reports too.
 *
 * usage: inject_cycles PID CYCLES [SAMPLER_DIR]
 *
 * With SAMPLER_DIR the sampler is published there and mapped from that
 * shared file, as the daemon does by default; without, from a memfd.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "allocator.h"
#include "inject.h"
#include "proc_info.h"
#include "sampler_choice.h"
#include "sampler_file.h"
#include "sampler_image.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The first bytes of each allocator function, as the process holds them. */
static int read_entries(pid_t pid, const struct allocator_plan *plan, uint8_t (*out)[16])
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    int ok = 1;
    for (size_t i = 0; i < plan->n && ok; i++)
        ok = fseeko(f, (off_t)plan->funcs[i].runtime_start, SEEK_SET) == 0 &&
             fread(out[i], 1, 16, f) == 16;
    fclose(f);
    return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: inject_cycles PID CYCLES [SAMPLER_DIR]\n");
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
    struct inject_plan ip;
    uint8_t before[HP_MAX_FUNCS][16], now[HP_MAX_FUNCS][16];
    uint64_t start_time = 0;
    if (inprocess_plan(&plan, &ip, err, sizeof(err)) != 0 || proc_start_time(pid, &start_time) ||
        read_entries(pid, &plan, before) != 0) {
        fprintf(stderr, "inject_cycles: plan the sampler of %d: %s\n", (int)pid, err);
        return 1;
    }
    struct sampler_file shared = {.fd = -1};
    const struct sampler_image *img = sampler_image_get(err, sizeof(err));
    if (argc == 4 && (!img || sampler_file_publish(argv[3], img, &shared, err, sizeof(err)))) {
        fprintf(stderr, "inject_cycles: %s\n", err);
        return 1;
    }
    ip.shared = shared.fd >= 0 ? &shared : NULL;
    uint64_t *at = calloc((size_t)cycles, sizeof(*at)), *dt = calloc((size_t)cycles, sizeof(*dt));
    int rc = at && dt ? 0 : 1;
    unsigned seed = (unsigned)pid;
    for (int c = 0; c < cycles && rc == 0; c++) {
        struct inject_state s;
        int e = inject_attach(pid, start_time, &ip, 4096, NULL, NULL, NULL, &s, err, sizeof(err));
        if (e) {
            fprintf(stderr, "inject_cycles: cycle %d: attach: %s\n", c, err);
            rc = 1;
            break;
        }
        at[c] = s.stopped_ns;
        uint32_t taken = s.status.slots_taken;
        if (ip.shared && !s.shared) {
            fprintf(stderr, "inject_cycles: cycle %d: not mapped from %s\n", c, shared.path);
            rc = 1;
        }
        if (taken == 0) {
            fprintf(stderr, "inject_cycles: cycle %d: no slot points at the sampler\n", c);
            rc = 1;
        }
        struct timespec pause = {0, (long)(rand_r(&seed) % 20) * 1000000L};
        nanosleep(&pause, NULL);
        e = inject_detach(&s, err, sizeof(err));
        dt[c] = s.stopped_ns;
        if (e || s.status.result != (int64_t)taken) {
            fprintf(stderr, "inject_cycles: cycle %d: detach: %s (%lld of %u slots given back)\n",
                    c, e ? err : "not every slot was given back", (long long)s.status.result,
                    taken);
            rc = 1;
        }
        inject_state_close(&s);
        if (read_entries(pid, &plan, now) != 0 || memcmp(before, now, plan.n * 16) != 0) {
            fprintf(stderr, "inject_cycles: cycle %d: the allocator's code changed\n", c);
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
    sampler_file_close(&shared);
    free(at);
    free(dt);
    allocator_plan_free(&plan);
    proc_maps_free(&maps);
    return rc;
}
