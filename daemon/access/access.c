/*
 * access.c - who a caller is (peer credentials, the peer socket's uid, the
 * user database's groups, trust), the ptrace-like ownership rule, and the
 * audit line of an attach (see access.h). Bearer tokens are in token.c.
 */
#include "access.h"

#include "proc_info.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "net_addr.h"
#include "peer_uid.h"
#include "strutil.h"

/* Largest uid or gid accepted as a number: (uid_t)-1 means "none" to the kernel. */
#define ACCESS_MAX_ID 4294967294ull

const char *access_via_name(enum access_via via)
{
    switch (via) {
    case ACCESS_VIA_CONFIG: return "config";
    case ACCESS_VIA_TCP: return "tcp";
    case ACCESS_VIA_UNIX: return "unix";
    case ACCESS_VIA_TOKEN: return "token";
    case ACCESS_VIA_OPEN_LOOPBACK: return "open-loopback";
    }
    return "unknown";
}

int access_is_loopback(const char *host)
{
    struct sockaddr_storage ss;
    return net_addr_parse(host, 0, &ss) > 0 && net_addr_is_loopback(&ss);
}

/* Adds `id` to a list of at most ACCESS_MAX_TRUSTED, once. */
static int add_id(unsigned *list, size_t *n, unsigned id)
{
    for (size_t i = 0; i < *n; i++)
        if (list[i] == id)
            return 0;
    if (*n == ACCESS_MAX_TRUSTED)
        return -ENOSPC;
    list[(*n)++] = id;
    return 0;
}

/* The id `value` gives, a number or a user's (or, with `group`, a group's)
 * name, added to a list; -EINVAL if there is no such user or group. */
static int add_named_id(unsigned *list, size_t *n, const char *value, int group)
{
    uint64_t number;
    char buf[16384];
    if (parse_u64(value, 0, ACCESS_MAX_ID, &number) == 0)
        return add_id(list, n, (unsigned)number);
    if (group) {
        struct group gr, *found = NULL;
        if (getgrnam_r(value, &gr, buf, sizeof(buf), &found) != 0 || !found)
            return -EINVAL;
        return add_id(list, n, found->gr_gid);
    }
    struct passwd pw, *found = NULL;
    if (getpwnam_r(value, &pw, buf, sizeof(buf), &found) != 0 || !found)
        return -EINVAL;
    return add_id(list, n, found->pw_uid);
}

int access_trust_add_uid(struct access_trust *t, const char *value)
{
    return add_named_id(t->uids, &t->nuids, value, 0);
}

int access_trust_add_group(struct access_trust *t, const char *value)
{
    return add_named_id(t->gids, &t->ngids, value, 1);
}

/* Adds `g` to c's groups unless there already or full. */
static void add_group(struct caller *c, gid_t g)
{
    for (size_t i = 0; i < c->ngids; i++)
        if (c->gids[i] == g)
            return;
    if (c->ngids < ACCESS_MAX_GROUPS)
        c->gids[c->ngids++] = g;
}

/* Adds the groups the user database lists for c->uid: its primary group
 * and the supplementary ones. */
static void add_database_groups(struct caller *c)
{
    struct passwd pw, *found = NULL;
    char buf[4096];
    /* A uid without an entry has no groups but the one SO_PEERCRED gave. */
    if (getpwuid_r(c->uid, &pw, buf, sizeof(buf), &found) != 0 || !found)
        return;
    gid_t groups[ACCESS_MAX_GROUPS];
    int n = ACCESS_MAX_GROUPS;
    if (getgrouplist(found->pw_name, found->pw_gid, groups, &n) < 0)
        n = ACCESS_MAX_GROUPS; /* more than we keep: the first ones */
    add_group(c, found->pw_gid);
    for (int i = 0; i < n; i++)
        add_group(c, groups[i]);
}

void access_resolve(struct caller *c, const struct access_trust *t)
{
    c->has_uid = 1;
    c->trusted = c->uid == 0;
    for (size_t i = 0; t && i < t->nuids; i++)
        c->trusted |= t->uids[i] == c->uid;
    /* A trusted uid needs no groups: they would only decide what it may
     * profile, which is everything (and root's lookups cost every scrape). */
    if (c->trusted)
        return;
    add_database_groups(c);
    for (size_t i = 0; t && i < t->ngids; i++)
        for (size_t j = 0; j < c->ngids; j++)
            c->trusted |= t->gids[i] == c->gids[j];
}

int access_identify_unix(int fd, const struct access_trust *t, struct caller *out, char *err,
                         size_t errlen)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        int e = errno;
        snprintf(err, errlen, "peer credentials unknown: %s", strerror(e));
        return -e;
    }
    out->via = ACCESS_VIA_UNIX;
    out->uid = cred.uid;
    out->ngids = 0;
    add_group(out, cred.gid);
    access_resolve(out, t);
    return 0;
}

int access_identify_tcp(int fd, const struct access_trust *t, struct caller *out, char *err,
                        size_t errlen)
{
    char why[200];
    int e = peer_uid_of_socket(fd, &out->uid, why, sizeof(why));
    if (e) {
        snprintf(err, errlen, "who is calling is unknown, so nothing is served: %s", why);
        return e;
    }
    out->via = ACCESS_VIA_TCP;
    out->ngids = 0;
    access_resolve(out, t);
    return 0;
}

int access_ids_allow(const struct caller *c, const unsigned uids[3], const unsigned gids[3])
{
    if (c->trusted)
        return 0;
    if (!c->has_uid)
        return -EACCES;
    for (int i = 0; i < 3; i++)
        if (uids[i] != c->uid)
            return -EACCES;
    /* The real, effective and saved gids must be one group, and one the
     * caller belongs to: a setgid program runs with a group not its user's. */
    if (gids[1] != gids[0] || gids[2] != gids[0])
        return -EACCES;
    for (size_t i = 0; i < c->ngids; i++)
        if (c->gids[i] == gids[0])
            return 0;
    return -EACCES;
}

int access_may_profile(const struct caller *c, pid_t pid)
{
    /* A trusted caller is not checked against /proc at all, so that what it
     * sees (a process that exited and is not detached yet, say) stays what
     * root always saw. */
    if (c->trusted)
        return 0;
    unsigned uids[3], gids[3];
    uid_t owner;
    int e = proc_status_ids(pid, uids, gids, &owner);
    if (e == 0)
        e = access_ids_allow(c, uids, gids);
    /* Its own, but not dumpable (PR_SET_DUMPABLE 0, or an exec that gained
     * ids or capabilities): ptrace refuses the user, and so do we. */
    if (e == 0 && owner != c->uid)
        e = -EPERM;
    return e;
}

/* Copies `s` into `out` quoted, with quotes, backslashes and bytes outside
 * printable ASCII escaped, so that a process name cannot forge a field. */
static void quote(char *out, size_t len, const char *s)
{
    size_t o = 0;
    out[o++] = '"';
    for (; *s && o + 6 < len; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            o += (size_t)snprintf(out + o, len - o, "\\%c", ch);
        else if (ch < 0x20 || ch >= 0x7f)
            o += (size_t)snprintf(out + o, len - o, "\\x%02x", ch);
        else
            out[o++] = (char)ch;
    }
    out[o++] = '"';
    out[o] = '\0';
}

void access_audit_attach(FILE *out, const struct caller *c, pid_t pid, const char *comm,
                         const char *sampler)
{
    char name[80], where[160], uid[24] = "-", line[512];
    quote(name, sizeof(name), comm ? comm : "");
    quote(where, sizeof(where), c->listener ? c->listener : "");
    if (c->has_uid)
        snprintf(uid, sizeof(uid), "%u", (unsigned)c->uid);
    /* One write, so that lines from several threads do not interleave. */
    snprintf(line, sizeof(line),
             "heapprofd: audit: attach pid=%d comm=%s sampler=%s uid=%s via=%s listener=%s "
             "trusted=%s\n",
             (int)pid, name, sampler ? sampler : "-", uid, access_via_name(c->via),
             where, c->trusted ? "yes" : "no");
    fputs(line, out);
    fflush(out);
}
