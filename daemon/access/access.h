/*
 * access.h - who may profile what. A heap profile exposes a process's code
 * paths and allocation sizes, and heapprofd runs with CAP_BPF and
 * CAP_SYS_PTRACE, so (docs/security.md):
 *  - the TCP listener binds loopback unless --allow-remote says otherwise,
 *    and may require a bearer token (--token-file);
 *  - the unix socket listener (--unix) knows its peer (SO_PEERCRED): root
 *    may profile any process, another user only processes whose real,
 *    effective and saved uids and gids are the caller's (ptrace's rule).
 */
#ifndef HEAPPROF_ACCESS_H
#define HEAPPROF_ACCESS_H

#include <stddef.h>
#include <sys/types.h>

/* Longest bearer token accepted (the file's first line). */
#define ACCESS_MAX_TOKEN 256

/* Who is asking. */
struct caller {
    int via_unix;  /* came through the unix socket: uid and gid are the peer's */
    uid_t uid;
    gid_t gid;
};

/* Whether `host` (as given to --listen) is a loopback address. */
int access_is_loopback(const char *host);

/* The peer credentials of a connected unix socket; -errno if unknown. */
int access_peer_credentials(int fd, struct caller *out);

/*
 * Whether `c` may profile process `pid`: 0, -EACCES (another user's), or
 * -ESRCH (no such process).
 */
int access_may_profile(const struct caller *c, pid_t pid);

/* Whether an Authorization header value carries `token` (constant time). */
int access_token_matches(const char *authorization, const char *token);

/* Reads the token from the first line of `path` into `out`; -errno and a reason on failure. */
int access_read_token(const char *path, char *out, size_t len, char *err, size_t errlen);

#endif
