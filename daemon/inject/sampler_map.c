/*
 * sampler_map.c - maps the sampler into a stopped process (see
 * sampler_map.h). The object's writable segment is mapped anonymous and
 * private, so that a forked child gets its own countdowns and filter.
 */
#include "sampler_map.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hp_sampler.h"
#include "remote_stub.h"

#define PAGE 4096ULL
/* Keep every jump this far inside the rel32 range. */
#define REACH ((1ULL << 31) - (1ULL << 24))

static int within_reach(uint64_t base, uint64_t span, uint64_t lo, uint64_t hi)
{
    uint64_t far_lo = base < lo ? lo - base : base + span - lo;
    uint64_t far_hi = base < hi ? hi - base : base + span - hi;
    if (base + span > lo && base < hi)
        return 0; /* cannot be: mappings do not overlap, but be sure */
    return far_lo < REACH && far_hi < REACH;
}

uint64_t sampler_map_choose_base(const struct proc_maps *maps, uint64_t span, uint64_t lo,
                                 uint64_t hi)
{
    uint64_t best = 0, best_dist = UINT64_MAX;
    for (size_t i = 0; i + 1 < maps->n; i++) {
        uint64_t gap_lo = maps->v[i].end + PAGE, gap_hi = maps->v[i + 1].start;
        if (gap_hi < gap_lo + span + PAGE)
            continue;
        uint64_t cands[2] = {gap_lo, (gap_hi - span - PAGE) & ~(PAGE - 1)};
        for (int c = 0; c < 2; c++) {
            uint64_t b = cands[c];
            if (b < 0x10000 || !within_reach(b, span, lo, hi))
                continue;
            uint64_t d = b < lo ? lo - b : b - lo;
            if (d < best_dist) {
                best = b;
                best_dist = d;
            }
        }
    }
    return best;
}

/* Runs a system call in the first stopped thread. */
static int64_t rsys(struct stopped_process *sp, uint64_t gadget, long nr, uint64_t a0, uint64_t a1,
                    uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5)
{
    uint64_t args[6] = {a0, a1, a2, a3, a4, a5};
    int64_t ret;
    int e = thread_remote_syscall(sp, 0, gadget, nr, args, &ret);
    return e ? e : ret;
}

/* Writes the object into the memfd `fd` of the process. */
static int fill_memfd(pid_t pid, int64_t fd, const struct sampler_image *img)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd/%lld", (int)pid, (long long)fd);
    int wfd = open(path, O_WRONLY | O_CLOEXEC);
    if (wfd < 0)
        return -errno;
    size_t done = 0;
    int e = 0;
    while (done < img->elf_len) {
        ssize_t w = write(wfd, img->elf + done, img->elf_len - done);
        if (w <= 0) {
            e = w < 0 ? -errno : -EIO;
            break;
        }
        done += (size_t)w;
    }
    close(wfd);
    return e;
}

static int map_segments(struct stopped_process *sp, int memfd, uint64_t gadget,
                        const struct sampler_image *img, uint64_t base, int64_t fd)
{
    for (size_t i = 0; i < img->nseg; i++) {
        const struct sampler_segment *s = &img->seg[i];
        uint64_t start = s->vaddr & ~(PAGE - 1);
        uint64_t end = (s->vaddr + s->memsz + PAGE - 1) & ~(PAGE - 1);
        int64_t r;
        if (s->prot & PROT_WRITE) {
            r = rsys(sp, gadget, SYS_mmap, base + start, end - start, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_FIXED | MAP_ANONYMOUS, (uint64_t)-1, 0);
            if (r == (int64_t)(base + start) &&
                pwrite(memfd, img->elf + s->offset, s->filesz, (off_t)(base + s->vaddr)) !=
                    (ssize_t)s->filesz)
                return -EIO;
        } else {
            r = rsys(sp, gadget, SYS_mmap, base + start, end - start, (uint64_t)s->prot,
                     MAP_PRIVATE | MAP_FIXED, (uint64_t)fd, s->offset & ~(PAGE - 1));
        }
        if (r != (int64_t)(base + start))
            return r < 0 ? (int)r : -EFAULT;
    }
    return 0;
}

static int map_with_stub(struct stopped_process *sp, int memfd, uint64_t gadget,
                         const struct sampler_image *img, uint64_t base, char *err,
                         size_t errlen)
{
    int64_t r = rsys(sp, gadget, SYS_mmap, base, img->span, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, (uint64_t)-1, 0);
    if (r != (int64_t)base) {
        if (r > 0)
            rsys(sp, gadget, SYS_munmap, (uint64_t)r, img->span, 0, 0, 0, 0);
        snprintf(err, errlen, "map %llu bytes at 0x%llx in process %d: %s",
                 (unsigned long long)img->span, (unsigned long long)base, (int)sp->pid,
                 strerror(r < 0 ? (int)-r : EEXIST));
        return r < 0 ? (int)r : -EEXIST;
    }
    /* The memfd's name goes into the reservation, which the segments then replace. */
    static const char name[] = HP_SAMPLER_MEMFD_NAME;
    int e = 0;
    int64_t fd = -1;
    if (pwrite(memfd, name, sizeof(name), (off_t)base) != (ssize_t)sizeof(name))
        e = -EIO;
    if (e == 0) {
        fd = rsys(sp, gadget, SYS_memfd_create, base, MFD_CLOEXEC, 0, 0, 0, 0);
        e = fd < 0 ? (int)fd : 0;
    }
    if (e == 0)
        e = fill_memfd(sp->pid, fd, img);
    if (e == 0)
        e = map_segments(sp, memfd, gadget, img, base, fd);
    if (fd >= 0)
        rsys(sp, gadget, SYS_close, (uint64_t)fd, 0, 0, 0, 0, 0);
    if (e) {
        rsys(sp, gadget, SYS_munmap, base, img->span, 0, 0, 0, 0);
        snprintf(err, errlen, "map the sampler into process %d: %s", (int)sp->pid, strerror(-e));
    }
    return e;
}

int sampler_map_into(struct stopped_process *sp, int memfd, uint64_t stub,
                     const struct sampler_image *img, uint64_t base, char *err, size_t errlen)
{
    struct user_regs_struct regs;
    uint8_t code[REMOTE_STUB_SIZE];
    int e = thread_get_regs(sp->v[0].tid, &regs);
    if (e == 0) {
        remote_stub_build(stub, &regs, code);
        e = pwrite(memfd, code, sizeof(code), (off_t)stub) == (ssize_t)sizeof(code) ? 0 : -EIO;
    }
    if (e) {
        snprintf(err, errlen, "prepare system calls in process %d: %s", (int)sp->pid,
                 strerror(-e));
        return e;
    }
    e = map_with_stub(sp, memfd, stub, img, base, err, errlen);
    /* The thread is back where it was: the stub is not needed any more. */
    memset(code, 0, sizeof(code));
    if (pwrite(memfd, code, sizeof(code), (off_t)stub) != (ssize_t)sizeof(code))
        fprintf(stderr, "heapprofd: process %d: could not erase the system call stub at 0x%llx\n",
                (int)sp->pid, (unsigned long long)stub);
    return e;
}
