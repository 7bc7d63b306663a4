/*
 * uprobe_link.c - BPF_LINK_CREATE for uprobe_multi and uprobe sessions by
 * hand (see uprobe_link.h).
 */
#include "uprobe_link.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/bpf.h>

#include "elf_file.h"

/* The link_create part of union bpf_attr with its uprobe_multi member, as
 * Linux 6.6+ lays it out (Debian's UAPI headers are older). */
struct link_create_uprobe_multi {
    uint32_t prog_fd;
    uint32_t target_fd;
    uint32_t attach_type;
    uint32_t flags;
    uint64_t path;
    uint64_t offsets;
    uint64_t ref_ctr_offsets;
    uint64_t cookies;
    uint32_t cnt;
    uint32_t multi_flags;
    uint32_t pid;
    uint32_t pad;
};
_Static_assert(offsetof(struct link_create_uprobe_multi, path) == 16, "uprobe_multi.path");
_Static_assert(offsetof(struct link_create_uprobe_multi, pid) == 56, "uprobe_multi.pid");

int uprobe_link_create(int prog_fd, uint32_t attach_type, const char *path,
                       const uint64_t *offsets, const uint64_t *cookies, uint32_t cnt,
                       uint32_t flags, pid_t pid)
{
    struct link_create_uprobe_multi attr;
    memset(&attr, 0, sizeof(attr));
    attr.prog_fd = (uint32_t)prog_fd;
    attr.attach_type = attach_type;
    attr.path = (uint64_t)(uintptr_t)path;
    attr.offsets = (uint64_t)(uintptr_t)offsets;
    attr.cookies = (uint64_t)(uintptr_t)cookies;
    attr.cnt = cnt;
    attr.multi_flags = flags;
    attr.pid = (uint32_t)pid;
    long fd = syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
    return fd < 0 ? -errno : (int)fd;
}

/* A function of ours that nothing calls: the feature probe's target. */
__attribute__((noinline, used)) void heapprofd_feature_probe_target(void)
{
    __asm__ volatile("");
}

int uprobe_link_supported(int prog_fd, uint32_t attach_type)
{
    struct elf_file *ef;
    struct elf_symbol sym;
    int e = elf_file_open("/proc/self/exe", &ef);
    if (e)
        return e;
    e = elf_file_find_function(ef, "heapprofd_feature_probe_target", false, &sym);
    elf_file_close(ef);
    if (e)
        return e;
    uint64_t cookie = 0;
    int fd = uprobe_link_create(prog_fd, attach_type, "/proc/self/exe", &sym.file_offset, &cookie,
                                1, 0, getpid());
    if (fd < 0)
        return fd;
    close(fd);
    return 0;
}
