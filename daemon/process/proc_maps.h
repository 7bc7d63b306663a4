/*
 * proc_maps.h - the memory map of a process, from /proc/PID/maps.
 *
 * Parsed into an array sorted by start address (the kernel's order), with
 * no two mappings overlapping: of two overlapping lines, which the kernel
 * prints when a VMA changes while the file is read, the later is kept. Used to
 * find the file and file offset behind a code address, and the files a
 * process has mapped (for the allocator search and the profile's mappings).
 *
 * Ownership: a `struct proc_maps` owns its array and each entry's `path`;
 * free with proc_maps_free().
 */
#ifndef HEAPPROF_PROC_MAPS_H
#define HEAPPROF_PROC_MAPS_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

/* One line of /proc/PID/maps. */
struct proc_mapping {
    uint64_t start;       /* first address */
    uint64_t end;         /* one past the last address */
    uint64_t offset;      /* file offset of `start` */
    uint64_t inode;       /* 0 for anonymous mappings */
    uint32_t dev_major;
    uint32_t dev_minor;
    bool readable, writable, executable, shared;
    bool deleted;         /* the path ended in " (deleted)", which is cut off */
    char *path;           /* "" for anonymous; "[heap]", "[vdso]" etc. kept as is */
};

/* All mappings of a process, sorted by start. */
struct proc_maps {
    struct proc_mapping *v;
    size_t n;
};

/*
 * Parses the text of a maps file. Lines that do not parse are an error
 * (-EINVAL): the kernel's format is fixed, so a bad line means bad input.
 */
int proc_maps_parse(const char *text, size_t len, struct proc_maps *out);

/* Reads and parses /proc/PID/maps; -ESRCH when the process does not exist. */
int proc_maps_read(pid_t pid, struct proc_maps *out);

/* Frees what proc_maps_parse/read allocated; the struct is left empty. */
void proc_maps_free(struct proc_maps *m);

/* The mapping that contains `addr`, or NULL (binary search). */
const struct proc_mapping *proc_maps_find(const struct proc_maps *m, uint64_t addr);

/* The length of `path` (`len` bytes) without the " (deleted)" the kernel
 * appends to the path of an unlinked file; *deleted (if not NULL) says
 * whether it was there. */
size_t proc_path_without_deleted(const char *path, size_t len, bool *deleted);

/* Whether a mapping is backed by a regular file (not anonymous, not [vdso] etc.). */
bool proc_mapping_is_file(const struct proc_mapping *pm);

#endif
