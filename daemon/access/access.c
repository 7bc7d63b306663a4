/*
 * access.c - loopback checks, peer credentials, the ptrace-like ownership
 * rule and bearer tokens (see access.h).
 */
#include "access.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "net_addr.h"

int access_is_loopback(const char *host)
{
    struct sockaddr_storage ss;
    return net_addr_parse(host, 0, &ss) > 0 && net_addr_is_loopback(&ss);
}

int access_peer_credentials(int fd, struct caller *out)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        return -errno;
    out->via_unix = 1;
    out->uid = cred.uid;
    out->gid = cred.gid;
    return 0;
}

/* Reads the "Uid:" and "Gid:" lines of /proc/PID/status (real, effective, saved). */
static int process_ids(pid_t pid, unsigned uids[3], unsigned gids[3])
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -ESRCH;
    int found = 0;
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "Uid: %u %u %u", &uids[0], &uids[1], &uids[2]) == 3)
            found |= 1;
        else if (sscanf(line, "Gid: %u %u %u", &gids[0], &gids[1], &gids[2]) == 3)
            found |= 2;
    }
    fclose(f);
    return found == 3 ? 0 : -ESRCH;
}

int access_may_profile(const struct caller *c, pid_t pid)
{
    unsigned uids[3], gids[3];
    int e = process_ids(pid, uids, gids);
    if (e)
        return e;
    if (!c->via_unix || c->uid == 0)
        return 0;
    for (int i = 0; i < 3; i++)
        if (uids[i] != c->uid || gids[i] != c->gid)
            return -EACCES;
    return 0;
}

int access_token_matches(const char *authorization, const char *token)
{
    static const char scheme[] = "Bearer ";
    if (!authorization || strncmp(authorization, scheme, sizeof(scheme) - 1) != 0)
        return 0;
    const char *given = authorization + sizeof(scheme) - 1;
    size_t n = strlen(token), m = strlen(given);
    /* Compare every byte whatever the lengths, so timing tells nothing. */
    unsigned diff = (unsigned)(n ^ m);
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)token[i] ^ (unsigned char)(i < m ? given[i] : 0);
    return diff == 0;
}

int access_read_token(const char *path, char *out, size_t len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        snprintf(err, errlen, "token file %s: %s", path, strerror(errno));
        return -errno;
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && (st.st_mode & 0077)) {
        fclose(f);
        snprintf(err, errlen, "token file %s is readable by others: chmod 600 it", path);
        return -EPERM;
    }
    char line[ACCESS_MAX_TOKEN + 2];
    int ok = fgets(line, sizeof(line), f) != NULL;
    fclose(f);
    line[ok ? strcspn(line, "\r\n") : 0] = '\0';
    if (!ok || strlen(line) < 16 || strlen(line) >= len || strlen(line) > ACCESS_MAX_TOKEN) {
        snprintf(err, errlen, "token file %s: want one line of 16 to %d characters", path,
                 ACCESS_MAX_TOKEN);
        return -EINVAL;
    }
    snprintf(out, len, "%s", line);
    return 0;
}
