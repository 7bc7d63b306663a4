/*
 * new_fail_size.c - the size from which no operator new can succeed (see
 * new_fail_size.h).
 *
 * The kernel's heuristic overcommit (vm.overcommit_memory = 0) refuses a
 * mapping larger than RAM and swap together, and strict accounting (2)
 * refuses it too (its commit limit is below that sum unless the ratio is
 * set above 100%, which is then the bound we miss: such a call is only not
 * sampled). Always overcommitting (1) refuses only what does not fit the
 * 47-bit user address space.
 */
#include "new_fail_size.h"

#include <stdio.h>
#include <sys/sysinfo.h>

#include "heapprof.skel.h"

/* The user address space of x86-64 with 4-level page tables: 128 TiB. */
#define USER_SPACE_BYTES (1ULL << 47)

uint64_t new_fail_size(void)
{
    int mode = 0;
    FILE *f = fopen("/proc/sys/vm/overcommit_memory", "re");
    if (f) {
        if (fscanf(f, "%d", &mode) != 1)
            mode = 0;
        fclose(f);
    }
    struct sysinfo si;
    if (mode == 1 || sysinfo(&si) != 0)
        return USER_SPACE_BYTES;
    uint64_t unit = si.mem_unit ? si.mem_unit : 1;
    uint64_t total = ((uint64_t)si.totalram + (uint64_t)si.totalswap) * unit;
    return total < USER_SPACE_BYTES ? total + 1 : USER_SPACE_BYTES;
}

void new_fail_size_set(struct heapprof *skel)
{
    skel->rodata->new_fail_size = new_fail_size();
}
