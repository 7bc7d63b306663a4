/*
 * sampler_map.c - maps the sampler into a process (see sampler_map.h). The
 * object's writable segment is mapped anonymous and private, so that a
 * forked child gets its own countdowns and filter.
 */
#include "sampler_map.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hp_sampler.h"
#include "remote_stub.h"

#define PAGE 4096ULL

uint64_t sampler_map_choose_base(const struct proc_maps *maps, uint64_t span, uint64_t near)
{
    uint64_t best = 0, best_dist = UINT64_MAX;
    for (size_t i = 0; i + 1 < maps->n; i++) {
        uint64_t gap_lo = maps->v[i].end + PAGE, gap_hi = maps->v[i + 1].start;
        if (gap_hi < gap_lo + span + PAGE)
            continue;
        uint64_t cands[2] = {gap_lo, (gap_hi - span - PAGE) & ~(PAGE - 1)};
        for (int c = 0; c < 2; c++) {
            uint64_t b = cands[c];
            if (b < 0x10000)
                continue;
            uint64_t d = b < near ? near - b : b - near;
            if (d < best_dist) {
                best = b;
                best_dist = d;
            }
        }
    }
    return best;
}

/* Runs a system call in the stopped thread. */
static int64_t rsys(struct stopped_thread *st, uint64_t stub, long nr, uint64_t a0, uint64_t a1,
                    uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5)
{
    uint64_t args[6] = {a0, a1, a2, a3, a4, a5};
    int64_t ret;
    int e = thread_remote_syscall(st, stub, nr, args, &ret);
    return e ? e : ret;
}

/* The process's descriptor `fd`, as ours, if it is the memfd we just had
 * it create: anything else there (a file another thread of the process
 * put on that number meanwhile) is refused. */
static int take_memfd(pid_t pid, int64_t fd, char *err, size_t errlen)
{
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0) {
        snprintf(err, errlen, "pidfd_open(%d): %s", (int)pid, strerror(errno));
        return -errno;
    }
    int ours = (int)syscall(SYS_pidfd_getfd, pidfd, (int)fd, 0);
    int e = ours < 0 ? -errno : 0;
    close(pidfd);
    if (e) {
        snprintf(err, errlen, "pidfd_getfd(%d, %lld): %s", (int)pid, (long long)fd, strerror(-e));
        return e;
    }
    struct stat sb;
    char link[64], target[128] = "";
    snprintf(link, sizeof(link), "/proc/self/fd/%d", ours);
    ssize_t n = readlink(link, target, sizeof(target) - 1);
    target[n > 0 ? n : 0] = '\0';
    if (fstat(ours, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_nlink != 0 || sb.st_size != 0 ||
        fcntl(ours, F_GET_SEALS) != 0 ||
        strcmp(target, "/memfd:" HP_SAMPLER_MEMFD_NAME " (deleted)") != 0) {
        snprintf(err, errlen, "process %d: descriptor %lld is not the memfd just created (%s): "
                 "refused", (int)pid, (long long)fd, target[0] ? target : "unreadable");
        close(ours);
        return -EPERM;
    }
    return ours;
}

/* Writes the object into our memfd and seals it: from then on nobody can
 * change what any process maps from it. */
static int fill_and_seal(int memfd, const struct sampler_image *img)
{
    size_t done = 0;
    while (done < img->elf_len) {
        ssize_t w = pwrite(memfd, img->elf + done, img->elf_len - done, (off_t)done);
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        done += (size_t)w;
    }
    if (fcntl(memfd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) != 0)
        return -errno;
    return 0;
}

int sampler_map_is_ours(pid_t pid, const struct sampler_image *img, uint64_t base, int memfd)
{
    struct stat sb;
    struct proc_maps maps;
    if (fstat(memfd, &sb) != 0 || proc_maps_read(pid, &maps) != 0)
        return 0;
    size_t file_backed = 0, matched = 0;
    for (size_t s = 0; s < img->nseg; s++) {
        if (img->seg[s].prot & PROT_WRITE)
            continue;
        file_backed++;
        uint64_t start = base + (img->seg[s].vaddr & ~(PAGE - 1));
        for (size_t i = 0; i < maps.n; i++)
            if (maps.v[i].start == start)
                matched += maps.v[i].inode == sb.st_ino &&
                           makedev(maps.v[i].dev_major, maps.v[i].dev_minor) == sb.st_dev;
    }
    proc_maps_free(&maps);
    return file_backed && matched == file_backed;
}

static int map_segments(struct stopped_thread *st, uint64_t stub, const struct sampler_image *img,
                        uint64_t base, int64_t fd)
{
    for (size_t i = 0; i < img->nseg; i++) {
        const struct sampler_segment *s = &img->seg[i];
        uint64_t start = s->vaddr & ~(PAGE - 1);
        uint64_t end = (s->vaddr + s->memsz + PAGE - 1) & ~(PAGE - 1);
        int64_t r;
        if (s->prot & PROT_WRITE) {
            r = rsys(st, stub, SYS_mmap, base + start, end - start, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_FIXED | MAP_ANONYMOUS, (uint64_t)-1, 0);
            if (r == (int64_t)(base + start) &&
                pwrite(st->mem_fd, img->elf + s->offset, s->filesz, (off_t)(base + s->vaddr)) !=
                    (ssize_t)s->filesz)
                return -EIO;
        } else {
            r = rsys(st, stub, SYS_mmap, base + start, end - start, (uint64_t)s->prot,
                     MAP_PRIVATE | MAP_FIXED, (uint64_t)fd, s->offset & ~(PAGE - 1));
        }
        if (r != (int64_t)(base + start))
            return r < 0 ? (int)r : -EFAULT;
    }
    return 0;
}

/*
 * Maps the segments from the shared file, opened by the process by its
 * path, over the reservation at `base`. 1 if what got mapped is the
 * file's inode; 0 if the process could not open it, or opened another
 * file there (its own mount namespace, a chroot): the reservation is then
 * made whole again for the memfd. -errno if even that failed.
 */
static int map_shared(struct stopped_thread *st, uint64_t stub, const struct sampler_image *img,
                      uint64_t base, const struct sampler_file *shared)
{
    size_t len = strlen(shared->path) + 1;
    if (len > img->span || pwrite(st->mem_fd, shared->path, len, (off_t)base) != (ssize_t)len)
        return 0;
    /* Not blocking on a FIFO, nor taking a terminal, should the path name
     * one in the process's namespace. */
    int64_t fd = rsys(st, stub, SYS_open, base,
                      O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0, 0, 0, 0);
    if (fd < 0)
        return 0;
    int e = map_segments(st, stub, img, base, fd);
    rsys(st, stub, SYS_close, (uint64_t)fd, 0, 0, 0, 0, 0);
    if (e == 0 && sampler_map_is_ours(st->pid, img, base, shared->fd))
        return 1;
    int64_t r = rsys(st, stub, SYS_mmap, base, img->span, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, (uint64_t)-1, 0);
    return r == (int64_t)base ? 0 : -EFAULT;
}

int sampler_map_into(struct stopped_thread *st, uint64_t stub, const struct sampler_image *img,
                     uint64_t base, const struct sampler_file *shared, int *memfd, char *err,
                     size_t errlen)
{
    *memfd = -1;
    int64_t r = rsys(st, stub, SYS_mmap, base, img->span, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, (uint64_t)-1, 0);
    if (r != (int64_t)base) {
        if (r > 0)
            rsys(st, stub, SYS_munmap, (uint64_t)r, img->span, 0, 0, 0, 0);
        snprintf(err, errlen, "map %llu bytes at 0x%llx in process %d: %s",
                 (unsigned long long)img->span, (unsigned long long)base, (int)st->pid,
                 strerror(r < 0 ? (int)-r : EEXIST));
        return r < 0 ? (int)r : -EEXIST;
    }
    int e = shared && shared->fd >= 0 ? map_shared(st, stub, img, base, shared) : 0;
    if (e == 1)
        return 0;
    if (e < 0)
        snprintf(err, errlen, "map the sampler into process %d: %s", (int)st->pid, strerror(-e));
    /* The memfd's name goes into the reservation, which the segments then replace. */
    static const char name[] = HP_SAMPLER_MEMFD_NAME;
    int64_t fd = -1;
    if (e == 0 && pwrite(st->mem_fd, name, sizeof(name), (off_t)base) != (ssize_t)sizeof(name))
        e = -EIO;
    if (e == 0) {
        fd = rsys(st, stub, SYS_memfd_create, base, MFD_CLOEXEC | MFD_ALLOW_SEALING, 0, 0, 0, 0);
        e = fd < 0 ? (int)fd : 0;
    }
    if (e == 0) {
        *memfd = take_memfd(st->pid, fd, err, errlen);
        e = *memfd < 0 ? *memfd : 0;
    }
    if (e == 0 && (e = fill_and_seal(*memfd, img)) != 0)
        snprintf(err, errlen, "fill the sampler's memfd: %s", strerror(-e));
    if (e == 0 && (e = map_segments(st, stub, img, base, fd)) != 0)
        snprintf(err, errlen, "map the sampler into process %d: %s", (int)st->pid, strerror(-e));
    if (fd >= 0)
        rsys(st, stub, SYS_close, (uint64_t)fd, 0, 0, 0, 0, 0);
    /* The number was the process's to change until now: what is mapped
     * must be our sealed memfd. */
    if (e == 0 && !sampler_map_is_ours(st->pid, img, base, *memfd)) {
        snprintf(err, errlen, "process %d: what was mapped at 0x%llx is not the sampler's memfd: "
                 "refused", (int)st->pid, (unsigned long long)base);
        e = -EPERM;
    }
    if (e) {
        rsys(st, stub, SYS_munmap, base, img->span, 0, 0, 0, 0);
        if (*memfd >= 0)
            close(*memfd);
        *memfd = -1;
    }
    return e;
}
