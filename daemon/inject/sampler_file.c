/*
 * sampler_file.c - the one sampler file every target maps (see
 * sampler_file.h): made with O_TMPFILE and linked in whole, so that no
 * process ever sees it half written, and taken over from another daemon
 * of this build only when it is root's, read-only and the same bytes.
 */
#include "sampler_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Whether `fd` is a file fit to be mapped by every target: a regular
 * file, root's, readable by all and writable by no one (0444), with exactly
 * the image's bytes. */
static int holds_image(int fd, const struct sampler_image *img)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != 0 ||
        (sb.st_mode & 0777) != 0444 || sb.st_nlink != 1 || (size_t)sb.st_size != img->elf_len)
        return 0;
    uint8_t *copy = malloc(img->elf_len);
    int same = copy && pread(fd, copy, img->elf_len, 0) == (ssize_t)img->elf_len &&
               memcmp(copy, img->elf, img->elf_len) == 0;
    free(copy);
    return same;
}

/* An unnamed file in `dirfd` holding the image, read-only; -errno. */
static int write_unnamed(int dirfd, const struct sampler_image *img)
{
    int fd = openat(dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0444);
    if (fd < 0)
        return -errno;
    size_t done = 0;
    while (done < img->elf_len) {
        ssize_t w = pwrite(fd, img->elf + done, img->elf_len - done, (off_t)done);
        if (w <= 0) {
            int e = w < 0 ? -errno : -EIO;
            close(fd);
            return e;
        }
        done += (size_t)w;
    }
    /* Readable by every target, whatever the daemon's umask (the unit's is
     * 0077). */
    if (fchmod(fd, 0444) != 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    return fd;
}

/* Links the unnamed file `fd` in as `name`, replacing what is there only
 * when `replace` (a file that is not fit to use: an interrupted write of
 * an old version, one changed by hand). */
static int link_in(int dirfd, int fd, const char *name, int replace)
{
    char self[40], tmp[300];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    if (!replace)
        return linkat(AT_FDCWD, self, dirfd, name, AT_SYMLINK_FOLLOW) == 0 ? 0 : -errno;
    snprintf(tmp, sizeof(tmp), ".%s.%d", name, (int)getpid());
    unlinkat(dirfd, tmp, 0);
    if (linkat(AT_FDCWD, self, dirfd, tmp, AT_SYMLINK_FOLLOW) != 0)
        return -errno;
    if (renameat(dirfd, tmp, dirfd, name) != 0) {
        int e = -errno;
        unlinkat(dirfd, tmp, 0);
        return e;
    }
    return 0;
}

/* Opens `dir`, made if missing, if only root can change what is in it. */
static int open_dir(const char *dir, char *err, size_t errlen)
{
    int made = mkdir(dir, 0755) == 0;
    if (!made && errno != EEXIST) {
        snprintf(err, errlen, "make %s: %s", dir, strerror(errno));
        return -errno;
    }
    int dirfd = open(dir, O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (made && dirfd >= 0)
        fchmod(dirfd, 0755); /* searchable by every target, whatever the umask */
    struct stat sb;
    if (dirfd < 0 || fstat(dirfd, &sb) != 0) {
        int e = errno;
        snprintf(err, errlen, "open %s: %s", dir, strerror(e));
        if (dirfd >= 0)
            close(dirfd);
        return -e;
    }
    if (sb.st_uid != 0 || (sb.st_mode & 022)) {
        snprintf(err, errlen, "%s is not root's alone (owner %u, mode %03o): targets would map "
                 "what another user can replace", dir, (unsigned)sb.st_uid,
                 (unsigned)(sb.st_mode & 0777));
        close(dirfd);
        return -EPERM;
    }
    return dirfd;
}

int sampler_file_publish(const char *dir, const struct sampler_image *img,
                         struct sampler_file *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    out->fd = -1;
    char name[96] = "sampler-";
    size_t at = strlen(name);
    for (size_t i = 0; i < img->build_id_len && i < 20; i++, at += 2)
        snprintf(name + at, sizeof(name) - at, "%02x", img->build_id[i]);
    snprintf(name + at, sizeof(name) - at, ".so");
    int dirfd = open_dir(dir, err, errlen);
    if (dirfd < 0)
        return dirfd;
    int e = -EAGAIN;
    /* Another daemon of this build may make it at the same time: whichever
     * links first, both then use that one. */
    for (int tries = 0; tries < 3 && e == -EAGAIN; tries++) {
        int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0 && holds_image(fd, img)) {
            out->fd = fd;
            e = 0;
            break;
        }
        int replace = fd >= 0 || errno != ENOENT;
        if (fd >= 0)
            close(fd);
        int nfd = write_unnamed(dirfd, img);
        e = nfd < 0 ? nfd : link_in(dirfd, nfd, name, replace);
        if (nfd >= 0)
            close(nfd);
        if (e == 0 || e == -EEXIST)
            e = -EAGAIN; /* opened and checked on the next turn */
    }
    close(dirfd);
    if (e) {
        snprintf(err, errlen, "publish the sampler in %s: %s", dir,
                 e == -EAGAIN ? "it keeps changing" : strerror(-e));
        return e;
    }
    struct stat sb;
    fstat(out->fd, &sb);
    out->dev = sb.st_dev;
    out->ino = sb.st_ino;
    snprintf(out->path, sizeof(out->path), "%s/%s", dir, name);
    snprintf(out->fd_path, sizeof(out->fd_path), "/proc/self/fd/%d", out->fd);
    return 0;
}

int sampler_file_is(const struct sampler_file *f, int fd)
{
    struct stat sb;
    return f && f->fd >= 0 && fstat(fd, &sb) == 0 && sb.st_dev == f->dev && sb.st_ino == f->ino;
}

void sampler_file_close(struct sampler_file *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
}
