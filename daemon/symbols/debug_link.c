/*
 * debug_link.c - the search for separate debug files (see debug_link.h).
 */
#include "debug_link.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <elfutils/libdwelf.h>

#include "build_id.h"

/* The roots to look under: the process's, then ours; at most two. */
struct roots {
    const char *v[2];
    size_t n;
};

/* The process's root, then ours. Both even when the process's root is our
 * root directory: in another mount namespace the same directory shows other
 * mounts (a container's debug files bind-mounted over /usr/lib/debug). */
static void roots_of(const struct debug_target *t, struct roots *r)
{
    r->n = 0;
    if (t->root && t->root[0])
        r->v[r->n++] = t->root;
    r->v[r->n++] = "";
}

/* Whether the CRC-32 of the whole file is `crc` (the .gnu_debuglink check). */
static bool crc_matches(int fd, uint32_t crc)
{
    unsigned char buf[65536];
    uLong c = crc32(0L, Z_NULL, 0);
    off_t off = 0;
    for (;;) {
        ssize_t n = pread(fd, buf, sizeof(buf), off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return false;
        if (n == 0)
            break;
        c = crc32(c, buf, (uInt)n);
        off += n;
    }
    return (uint32_t)c == crc;
}

/* Whether the open candidate is the debug file of `t`. */
static bool is_debug_file_of(const struct debug_target *t, int fd)
{
    if (t->build_id_len == 0)
        return t->debuglink && crc_matches(fd, t->debuglink_crc);
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    const void *id = NULL;
    ssize_t len = elf ? dwelf_elf_gnu_build_id(elf, &id) : -1;
    bool same =
        len > 0 && (size_t)len == t->build_id_len && memcmp(id, t->build_id, (size_t)len) == 0;
    elf_end(elf);
    return same;
}

/* Opens `path` inside `root` (safe_open_in_root(): the process controls
 * both the names and the files there) if it is a regular file other than
 * the file itself that t's reader may read and that passes `check`
 * (NULL: any); returns the descriptor and *found (root and path). */
static int try_path(const struct debug_target *t, const char *root, const char *path, bool check,
                    char **found)
{
    struct stat st;
    int fd = safe_open_in_root(root, path, &t->reader, &st);
    if (fd < 0)
        return fd == -ENOMEM ? fd : -ENOENT;
    if ((st.st_dev == t->dev && st.st_ino == t->ino) || (check && !is_debug_file_of(t, fd))) {
        close(fd);
        return -ENOENT;
    }
    if (asprintf(found, "%s%s", root, path) < 0) {
        *found = NULL;
        close(fd);
        return -ENOMEM;
    }
    return fd;
}

/* try_path() on ROOT and the path `fmt` makes; -ENAMETOOLONG if it does
 * not fit. */
__attribute__((format(printf, 5, 6))) static int try_formatted(const struct debug_target *t,
                                                               const char *root, bool check,
                                                               char **found, const char *fmt, ...)
{
    char path[PATH_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(path, sizeof(path), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(path))
        return -ENAMETOOLONG;
    return try_path(t, root, path, check, found);
}

/* The root a found path (root and path, as try_path() makes it) is under,
 * and the path inside it. */
static const char *split_root(const struct debug_target *t, const char *full, const char **root)
{
    size_t n = t->root ? strlen(t->root) : 0;
    if (n && strncmp(full, t->root, n) == 0 && full[n] == '/') {
        *root = t->root;
        return full + n;
    }
    *root = "";
    return full;
}

/* Tries ROOT/usr/lib/debug/.build-id/xx/yyyy.debug. */
static int try_build_id(const struct debug_target *t, const char *root, char **found)
{
    char hex[BUILD_ID_HEX_SIZE];
    if (t->build_id_len < 2 || t->build_id_len > BUILD_ID_MAX_BYTES)
        return -ENOENT;
    build_id_hex(t->build_id, t->build_id_len, hex);
    return try_formatted(t, root, true, found, "%s/.build-id/%.2s/%s.debug", DEBUG_LINK_DIR, hex,
                         hex + 2);
}

/* Tries the three .gnu_debuglink places under ROOT. */
static int try_debuglink(const struct debug_target *t, const char *root, char **found)
{
    const char *slash = t->path ? strrchr(t->path, '/') : NULL;
    if (!t->debuglink || !t->debuglink[0] || strchr(t->debuglink, '/') || !slash ||
        t->path[0] != '/')
        return -ENOENT;
    int dirlen = (int)(slash - t->path);
    /* Beside the file, in .debug beside it, and under DEBUG_LINK_DIR. */
    int fd = try_formatted(t, root, true, found, "%.*s/%s", dirlen, t->path, t->debuglink);
    if (fd < 0 && fd != -ENOMEM)
        fd = try_formatted(t, root, true, found, "%.*s/.debug/%s", dirlen, t->path, t->debuglink);
    if (fd < 0 && fd != -ENOMEM)
        fd = try_formatted(t, root, true, found, DEBUG_LINK_DIR "%.*s/%s", dirlen, t->path,
                           t->debuglink);
    return fd >= 0 || fd == -ENOMEM ? fd : -ENOENT;
}

int debug_link_open(const struct debug_target *t, char **found)
{
    struct roots r;
    roots_of(t, &r);
    /* By build ID everywhere first: it cannot pick a stale file. */
    for (size_t i = 0; i < r.n; i++) {
        int fd = try_build_id(t, r.v[i], found);
        if (fd >= 0 || fd == -ENOMEM)
            return fd;
    }
    for (size_t i = 0; i < r.n; i++) {
        int fd = try_debuglink(t, r.v[i], found);
        if (fd >= 0 || fd == -ENOMEM)
            return fd;
    }
    return -ENOENT;
}

int debug_link_open_alt(const struct debug_target *t, const char *debug_path, const char *altname,
                        char **found)
{
    if (!altname || !altname[0])
        return -ENOENT;
    if (altname[0] != '/') {
        /* Relative to the debug file, which is already under the right root. */
        const char *root;
        const char *inside = debug_path ? split_root(t, debug_path, &root) : NULL;
        const char *slash = inside ? strrchr(inside, '/') : NULL;
        if (!slash)
            return -ENOENT;
        return try_formatted(t, root, false, found, "%.*s/%s", (int)(slash - inside), inside,
                             altname);
    }
    struct roots r;
    roots_of(t, &r);
    for (size_t i = 0; i < r.n; i++) {
        int fd = try_path(t, r.v[i], altname, false, found);
        if (fd >= 0 || fd == -ENOMEM)
            return fd;
    }
    return -ENOENT;
}

/* The .gnu_debugaltlink section of `elf`, or NULL. */
static Elf_Data *altlink_data(Elf *elf)
{
    size_t shstrndx;
    if (elf_getshdrstrndx(elf, &shstrndx) != 0)
        return NULL;
    for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
        GElf_Shdr sh;
        const char *name = gelf_getshdr(scn, &sh) ? elf_strptr(elf, shstrndx, sh.sh_name) : NULL;
        if (name && strcmp(name, ".gnu_debugaltlink") == 0 && sh.sh_type != SHT_NOBITS)
            return elf_getdata(scn, NULL);
    }
    return NULL;
}

int debug_link_alt_build_id(const struct debug_target *t, const char *debug_path, unsigned char *id,
                            size_t *len)
{
    if (!debug_path)
        return -ENOENT;
    const char *root;
    const char *inside = split_root(t, debug_path, &root);
    struct stat st;
    int fd = safe_open_in_root(root, inside, &t->reader, &st);
    if (fd < 0)
        return fd;
    int err = -ENOENT;
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    Elf_Data *d = elf ? altlink_data(elf) : NULL;
    const char *bytes = d ? d->d_buf : NULL;
    /* The file name, its NUL, then the build ID to the section's end. */
    const char *nul = bytes ? memchr(bytes, '\0', d->d_size) : NULL;
    if (nul) {
        size_t n = d->d_size - (size_t)(nul + 1 - bytes);
        if (n > 0 && n <= BUILD_ID_MAX_BYTES) {
            memcpy(id, nul + 1, n);
            *len = n;
            err = 0;
        }
    }
    elf_end(elf);
    close(fd);
    return err;
}
