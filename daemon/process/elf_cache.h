/*
 * elf_cache.h - ELF files read once and shared by every attach that maps
 * them. Reading a library's symbol tables (and sorting them) is most of
 * what finding a process's allocator costs: a burst of new processes all
 * map the same libc, and without the cache each attach read it again.
 *
 * A file is known by its device, inode, size and modification time, taken
 * from the descriptor opened for the caller: a file rewritten in place is
 * read afresh. The objects are never changed after elf_file_open_fd(), so
 * any number of threads may use one at a time.
 *
 * Ownership: each elf_cache_open() is matched by one elf_cache_put().
 */
#ifndef HEAPPROF_ELF_CACHE_H
#define HEAPPROF_ELF_CACHE_H

#include "elf_file.h"

/* The file at `path`, from the cache or read now; 0 or -errno. */
int elf_cache_open(const char *path, struct elf_file **out);

/* Lets go of a file elf_cache_open() gave (NULL: nothing). */
void elf_cache_put(struct elf_file *ef);

#endif
