/*
 * symbolizer.h - names the code addresses of one ELF file with elfutils
 * (libdwfl): function, source file and line from DWARF, with each inlined
 * call as a line of its own (innermost first, as pprof wants); without
 * DWARF, the function from the symbol table (.symtab, else .dynsym, or the
 * MiniDebugInfo .gnu_debugdata that libdwfl decompresses). Separate debug
 * files are found as debug_link.h says, else fetched from debuginfod
 * (debuginfod_fetch.h). Names are demangled (demangle.h).
 *
 * Not thread-safe: one lookup at a time per symbolizer (the symbol cache
 * holds a lock per file). DWARF is read lazily, on the first lookup.
 *
 * Ownership: symbolizer_open() returns an object that owns the file and
 * everything read from it; the `file` strings of a lookup's lines point
 * into it and live until symbolizer_close(); the names are malloc'd per
 * lookup and freed by sym_frame_free().
 */
#ifndef HEAPPROF_SYMBOLIZER_H
#define HEAPPROF_SYMBOLIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Lines kept per address: the call itself and the calls inlined into it.
 * Deeper inline chains than this are rare even in C++ (std containers nest
 * about ten); the outermost lines beyond it are dropped. */
#define SYM_MAX_LINES 48

/* One line of a location. */
struct sym_line {
    char *name;        /* display name (demangle_simplify), malloc'd */
    char *system_name; /* full demangled name, malloc'd */
    const char *file;  /* source file, "" if unknown; owned by the symbolizer */
    int64_t line;      /* 0 if unknown */
};

/* What one address resolves to. */
struct sym_frame {
    struct sym_line lines[SYM_MAX_LINES]; /* innermost first */
    size_t n;                             /* 0: nothing is known of it */
    bool from_dwarf;                      /* lines come from DWARF: files, lines, inlined calls */
};

struct symbolizer;

/*
 * Opens the ELF file at `open_path` (e.g. /proc/PID/map_files/...), which
 * the process `root` ("/proc/PID/root", or "" for ours) knows as `path`:
 * both say where its debug files may be. -ENOENT, -EACCES, -ENOEXEC (not
 * ELF), -ENOMEM.
 */
int symbolizer_open(const char *open_path, const char *root, const char *path,
                    struct symbolizer **out);

struct debuginfod_fetch;

/* Opens the debug files of `z` only if user `uid` (group `gid`), for whose
 * process they are looked for, could read them itself (safe_open.h). */
void symbolizer_set_reader(struct symbolizer *z, uid_t uid, gid_t gid);

/* Whether `z` is of the file `dev`/`ino`: a path may name another file by
 * the time it is opened. */
bool symbolizer_is_file(const struct symbolizer *z, dev_t dev, ino_t ino);

/* symbolizer_open(), asking `fetch` (debuginfod_fetch.h; NULL: none) for
 * the debug file by build ID when there is no local one. */
int symbolizer_open_fetching(const char *open_path, const char *root, const char *path,
                             struct debuginfod_fetch *fetch, struct symbolizer **out);
/* Closes it; NULL is fine. */
void symbolizer_close(struct symbolizer *z);

/* The GNU build ID as lowercase hex, "" if the file has none. */
const char *symbolizer_build_id(const struct symbolizer *z);

/* The ELF virtual address of file offset `offset`, through the PT_LOAD segments; -ENOENT. */
int symbolizer_offset_to_vaddr(const struct symbolizer *z, uint64_t offset, uint64_t *vaddr);

/* Names ELF virtual address `vaddr` into *out (empty if nothing is known);
 * 0 or -ENOMEM. Free *out with sym_frame_free(). */
int symbolizer_lookup(struct symbolizer *z, uint64_t vaddr, struct sym_frame *out);
void sym_frame_free(struct sym_frame *f);

/* Bytes of files it has open and mapped (the file and its debug file), for
 * the symbol cache's bound. */
uint64_t symbolizer_bytes(const struct symbolizer *z);

/* The debug file found, "" if none (yet): for tests and logs. */
const char *symbolizer_debug_path(const struct symbolizer *z);

/* Whether debuginfod brought the debug file this symbolizer looked for and
 * did not find: a symbolizer opened anew would use it (libdwfl looks for a
 * debug file once). Queues a retry of the fetch when one is due. Without
 * the symbolizer's lock: it reads only what is fixed at open and an atomic
 * flag; costs nothing unless a fetch was asked for. */
bool symbolizer_debuginfod_arrived(struct symbolizer *z);

#endif
