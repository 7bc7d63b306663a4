/*
 * access.h - who may profile what. A heap profile exposes a process's code
 * paths and allocation sizes, attaching slows the process down, and
 * heapprofd runs with CAP_BPF and CAP_SYS_PTRACE, so (docs/security.md):
 *  - every caller is identified: on loopback TCP by the owner uid of the
 *    peer socket (peer_uid.h), on the unix socket by SO_PEERCRED, on a
 *    listener with --token-file by the bearer token;
 *  - a trusted caller (root, a trust-uid, a member of a trust-group, the
 *    holder of the token, anyone under --open-loopback) may profile any
 *    process; another only processes whose real, effective and saved uids
 *    are its own, whose gids are one group it belongs to, and that are
 *    dumpable (ptrace's rule, without the capabilities).
 */
#ifndef HEAPPROF_ACCESS_H
#define HEAPPROF_ACCESS_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* Longest bearer token accepted (the file's first line). */
#define ACCESS_MAX_TOKEN 256
/* Groups of a caller kept: its primary group and supplementary ones from
 * the user database. A user in more is checked against the first these. */
#define ACCESS_MAX_GROUPS 256
/* trust-uid and trust-group settings at most, each. */
#define ACCESS_MAX_TRUSTED 64

/* How a caller reached the daemon. */
enum access_via {
    ACCESS_VIA_CONFIG,        /* the daemon itself: --pid, target rules */
    ACCESS_VIA_TCP,           /* loopback TCP: uid of the peer socket */
    ACCESS_VIA_UNIX,          /* the unix socket: SO_PEERCRED */
    ACCESS_VIA_TOKEN,         /* a TCP listener with --token-file: the token */
    ACCESS_VIA_OPEN_LOOPBACK, /* --open-loopback: every local caller trusted */
};

/* Who is asking. */
struct caller {
    enum access_via via;
    const char *listener; /* "127.0.0.1:6060" or the socket path; not owned */
    int trusted;          /* may profile any process */
    int has_uid;          /* uid and gids are known */
    uid_t uid;
    size_t ngids;
    gid_t gids[ACCESS_MAX_GROUPS]; /* the groups it belongs to */
};

/* The callers trusted with every process besides root (trust-uid, trust-group). */
struct access_trust {
    uid_t uids[ACCESS_MAX_TRUSTED];
    size_t nuids;
    gid_t gids[ACCESS_MAX_TRUSTED];
    size_t ngids;
};

/* The name of a way in, as the audit line writes it ("tcp", "unix", ...). */
const char *access_via_name(enum access_via via);

/* Whether `host` (as given to --listen) is a loopback address. */
int access_is_loopback(const char *host);

/* Adds a trust-uid (a number or a user name); -EINVAL if there is no such
 * user, -ENOSPC if ACCESS_MAX_TRUSTED are given already. */
int access_trust_add_uid(struct access_trust *t, const char *value);
/* Adds a trust-group (a name or a number); -EINVAL or -ENOSPC likewise. */
int access_trust_add_group(struct access_trust *t, const char *value);

/*
 * Sets c->trusted if c->uid is root or in `t`; else adds c's groups from
 * the user database (its primary group and the supplementary ones) after
 * any already there, and sets c->trusted if one of them is in `t`.
 */
void access_resolve(struct caller *c, const struct access_trust *t);

/*
 * The caller on the other end of a connected unix socket (SO_PEERCRED),
 * resolved against `t`; -errno and a reason if its credentials are unknown.
 */
int access_identify_unix(int fd, const struct access_trust *t, struct caller *out, char *err,
                         size_t errlen);

/*
 * The caller on the other end of a loopback TCP connection: the owner uid
 * of the peer socket (peer_uid.h), resolved against `t`; -errno and a
 * reason if it cannot be found, which must refuse the request.
 */
int access_identify_tcp(int fd, const struct access_trust *t, struct caller *out, char *err,
                        size_t errlen);

/*
 * Whether `c` may profile process `pid`: 0, -EACCES (another user's),
 * -EPERM (its own but not dumpable, which ptrace refuses too), or -ESRCH
 * (no such process, for an untrusted caller). A trusted caller may profile
 * any pid: 0 without looking.
 */
int access_may_profile(const struct caller *c, pid_t pid);

/* The ownership rule alone, on a process's real, effective and saved uids
 * and gids (as /proc/PID/status lists them): 0 or -EACCES. */
int access_ids_allow(const struct caller *c, const unsigned uids[3], const unsigned gids[3]);

/* Whether an Authorization header value carries `token` (constant time). */
int access_token_matches(const char *authorization, const char *token);

/* Reads the token from the first line of `path` into `out`; -errno and a reason on failure. */
int access_read_token(const char *path, char *out, size_t len, char *err, size_t errlen);

/*
 * Writes the audit line of an attach to `out`: which process (pid, comm),
 * which sampler, who asked (uid, the way in, the listener), as one line of
 * key=value pairs.
 */
void access_audit_attach(FILE *out, const struct caller *c, pid_t pid, const char *comm,
                         const char *sampler);

#endif
