/*
 * elf_file.h - what heapprofd needs from an ELF file, read with libelf.
 *
 * The GNU build ID, the program headers (to turn file offsets into virtual
 * addresses and back), function symbols by name (to place uprobes) and by
 * address (to name the frames of a stack), the DT_NEEDED list, and raw bytes
 * at a virtual address (to inspect code before probing it).
 *
 * Function symbols come from .symtab when the file has one, else .dynsym;
 * both are read at open and kept sorted by address.
 *
 * Ownership: elf_file_open() returns an object that owns the file
 * descriptor and all strings it hands out; they live until elf_file_close().
 */
#ifndef HEAPPROF_ELF_FILE_H
#define HEAPPROF_ELF_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct elf_file;

/* A function symbol. */
struct elf_symbol {
    const char *name;     /* owned by the elf_file */
    uint64_t vaddr;       /* st_value */
    uint64_t size;        /* st_size, 0 if the file does not say */
    uint64_t file_offset; /* where vaddr's byte is in the file */
};

/* Opens `path`; -ENOENT, -EACCES, or -ENOEXEC (not a 64-bit ELF file). */
int elf_file_open(const char *path, struct elf_file **out);
/* As elf_file_open(), from the file open on `fd`, which it takes over
 * (closed by elf_file_close(), or at once on failure). */
int elf_file_open_fd(int fd, struct elf_file **out);
/* The same without reading the symbol tables (a large library has
 * hundreds of thousands): for the build ID and the address translations
 * only; the symbol functions then find nothing. */
int elf_file_open_headers(const char *path, struct elf_file **out);
/* Closes the file and frees everything it handed out; NULL is fine. */
void elf_file_close(struct elf_file *ef);

/* ET_EXEC, ET_DYN, ... */
int elf_file_type(const struct elf_file *ef);
/* EM_X86_64, EM_AARCH64, ...: the machine its code is for. */
int elf_file_machine(const struct elf_file *ef);

/*
 * The GNU build ID (NT_GNU_BUILD_ID note) as lowercase hex into `hex`
 * (`cap` = BUILD_ID_HEX_SIZE holds any; build_id.h); -ENOENT if the file
 * has none, -ENOSPC if `cap` is too small.
 */
int elf_file_build_id(const struct elf_file *ef, char *hex, size_t cap);

/* File offset of virtual address `vaddr`, through the PT_LOAD segments; -ENOENT if none. */
int elf_file_vaddr_to_offset(const struct elf_file *ef, uint64_t vaddr, uint64_t *offset);
/* Virtual address of file offset `offset`, through the PT_LOAD segments; -ENOENT if none. */
int elf_file_offset_to_vaddr(const struct elf_file *ef, uint64_t offset, uint64_t *vaddr);

/*
 * The defined function (STT_FUNC or STT_GNU_IFUNC) named `name`. With
 * `dynamic_only`, only .dynsym is searched (what the dynamic linker can bind
 * to). Versioned names match their base name ("malloc" finds the default
 * version "malloc@@GLIBC_2.2.5"). -ENOENT if not defined here.
 */
int elf_file_find_function(const struct elf_file *ef, const char *name, bool dynamic_only,
                           struct elf_symbol *out);

/* The defined data object (STT_OBJECT) named `name` in .dynsym, read from
 * the file at each call (objects are not kept): the dynamic linker's
 * `_rtld_global`, for instance. -ENOENT if not defined here. */
int elf_file_find_dynamic_object(const struct elf_file *ef, const char *name,
                                 struct elf_symbol *out);

/* Whether `name` is a defined function in .dynsym. */
bool elf_file_exports_function(const struct elf_file *ef, const char *name);

/*
 * The function symbol containing `vaddr`: the one with the greatest start
 * <= vaddr, within its size when the size is known. -ENOENT if none.
 */
int elf_file_symbolize(const struct elf_file *ef, uint64_t vaddr, struct elf_symbol *out);

/* Number of DT_NEEDED entries, and the i-th one's name. */
size_t elf_file_needed_count(const struct elf_file *ef);
const char *elf_file_needed(const struct elf_file *ef, size_t i);

/* Whether the file has a PT_INTERP or PT_DYNAMIC (is dynamically linked). */
bool elf_file_is_dynamic(const struct elf_file *ef);

/* Copies `len` bytes at virtual address `vaddr` from the file; -ENOENT if not in a PT_LOAD's file part. */
int elf_file_read(const struct elf_file *ef, uint64_t vaddr, void *buf, size_t len);

#endif
