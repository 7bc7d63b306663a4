/*
 * debug_link.h - finds the separate debug information of an ELF file where
 * distributions put it, looking inside the profiled process's root first
 * (/proc/PID/root: a container's debug files belong to its binaries) and
 * then in ours:
 *
 *   ROOT/usr/lib/debug/.build-id/xx/yyyy.debug      by GNU build ID
 *   ROOT/DIR/LINK, ROOT/DIR/.debug/LINK,
 *   ROOT/usr/lib/debug/DIR/LINK                      by .gnu_debuglink
 *
 * where DIR is the directory of the file as the process sees it. A candidate
 * is taken only when its build ID matches the file's, or, for a file without
 * one, when its CRC-32 matches the debuglink's; the file itself never is.
 * (.gnu_debugdata, MiniDebugInfo, needs no search: libdwfl reads it from the
 * file.)
 */
#ifndef HEAPPROF_DEBUG_LINK_H
#define HEAPPROF_DEBUG_LINK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "safe_open.h"

/* Where distributions install debug files. */
#define DEBUG_LINK_DIR "/usr/lib/debug"

/* What is known of the file whose debug information is wanted. */
struct debug_target {
    const char *root;              /* the process's root ("/proc/PID/root"), or "" for ours */
    const char *path;              /* the file's path as the process sees it, or "" */
    const unsigned char *build_id; /* GNU build ID bytes, or NULL */
    size_t build_id_len;
    const char *debuglink; /* .gnu_debuglink file name, or NULL */
    uint32_t debuglink_crc;
    dev_t dev; /* the file itself, never its own debug file */
    ino_t ino;
    /* Whom the files are opened for (the process's owner: it must be able
     * to read them itself), and their size bound. */
    struct safe_open_rule reader;
};

/*
 * Opens the debug file of `t`, every candidate with safe_open_in_root()
 * (the process controls the names and the directories). Returns a file descriptor (the caller
 * closes it) and its path in *found (malloc'd), or -ENOENT if there is none.
 */
int debug_link_open(const struct debug_target *t, char **found);

/*
 * Opens the supplementary file named by a debug file's .gnu_debugaltlink
 * (shared DWARF made by dwz): `altname` is absolute, or relative to the
 * directory of `debug_path`. Returns a file descriptor and *found, or -ENOENT.
 */
int debug_link_open_alt(const struct debug_target *t, const char *debug_path, const char *altname,
                        char **found);

/*
 * The build ID of the supplementary file that the debug file at
 * `debug_path` (found for `t`) names in its .gnu_debugaltlink section (the file name, then
 * the build ID's bytes), into `id` (BUILD_ID_MAX_BYTES bytes) and *len: 0,
 * or -ENOENT when it names none, -errno when it cannot be read. For
 * fetching that file by build ID when it is not installed.
 */
int debug_link_alt_build_id(const struct debug_target *t, const char *debug_path, unsigned char *id,
                            size_t *len);

#endif
