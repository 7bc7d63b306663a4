/*
 * peer_uid.c - the owner uid of the other end of a local TCP connection,
 * through NETLINK_SOCK_DIAG (see peer_uid.h).
 *
 * Why not a library: libmnl or libnl would wrap the netlink framing, but
 * one request and one fixed-size answer are a few lines, and what matters
 * here is what the answer is checked for, which no library does for us:
 *  - the kernel looks the socket up by the 4-tuple, and if no connected
 *    socket matches it may answer another one (a listener on that port):
 *    the answer must name exactly the 4-tuple asked for;
 *  - a socket that no process holds any more (closed, or turned into a
 *    TIME_WAIT mini-socket) is reported with uid 0 and inode 0: a client
 *    that closes its end right after sending would otherwise pass as root.
 *    Only sockets with an inode (held by a file) count.
 */
#include "peer_uid.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include <linux/netlink.h>
#include <linux/sock_diag.h>

/* How long the kernel's answer may take: it comes at once or never. */
#define PEER_UID_TIMEOUT_MS 2000

/* An address as 16 bytes, IPv4 as IPv4-mapped IPv6, so that an AF_INET6
 * socket connected to an IPv4 address compares equal to its AF_INET peer. */
static void canonical_address(unsigned family, const __be32 addr[4], unsigned char out[16])
{
    if (family == AF_INET) {
        memset(out, 0, 10);
        out[10] = out[11] = 0xff;
        memcpy(out + 12, &addr[0], 4);
    } else {
        memcpy(out, addr, 16);
    }
}

/* Whether socket `got` (family `gfam`) is the one `want` (family `wfam`) names. */
static int same_socket(unsigned wfam, const struct inet_diag_sockid *want, unsigned gfam,
                       const struct inet_diag_sockid *got)
{
    unsigned char a[16], b[16];
    if (want->idiag_sport != got->idiag_sport || want->idiag_dport != got->idiag_dport)
        return 0;
    canonical_address(wfam, want->idiag_src, a);
    canonical_address(gfam, got->idiag_src, b);
    if (memcmp(a, b, 16) != 0)
        return 0;
    canonical_address(wfam, want->idiag_dst, a);
    canonical_address(gfam, got->idiag_dst, b);
    return memcmp(a, b, 16) == 0;
}

int peer_uid_parse_reply(const void *buf, size_t len, unsigned family,
                         const struct inet_diag_sockid *want, uid_t *uid, char *err,
                         size_t errlen)
{
    /* NLMSG_OK and NLMSG_NEXT, with sizes that stay unsigned. */
    const char *at = buf;
    for (size_t rem = len; rem >= sizeof(struct nlmsghdr);) {
        const struct nlmsghdr *h = (const struct nlmsghdr *)at;
        if (h->nlmsg_len < sizeof(*h) || h->nlmsg_len > rem)
            break;
        size_t step = NLMSG_ALIGN(h->nlmsg_len) < rem ? NLMSG_ALIGN(h->nlmsg_len) : rem;
        at += step;
        rem -= step;
        if (h->nlmsg_type == NLMSG_ERROR) {
            const struct nlmsgerr *e = NLMSG_DATA(h);
            if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*e)) || e->error >= 0 || e->error < -4095)
                break;
            snprintf(err, errlen, "the kernel found no socket at the other end: %s",
                     strerror(-e->error));
            return e->error == -ENOENT ? -ENOENT : e->error;
        }
        if (h->nlmsg_type == NLMSG_DONE)
            break;
        if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY)
            continue;
        const struct inet_diag_msg *m = NLMSG_DATA(h);
        if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*m)))
            break;
        if ((m->idiag_family != AF_INET && m->idiag_family != AF_INET6) ||
            !same_socket(family, want, m->idiag_family, &m->id)) {
            snprintf(err, errlen, "the kernel answered for another socket than the peer");
            return -ENOENT;
        }
        if (m->idiag_inode == 0) {
            snprintf(err, errlen, "the peer socket is closed (state %u): its owner is unknown",
                     (unsigned)m->idiag_state);
            return -ENOENT;
        }
        *uid = (uid_t)m->idiag_uid;
        return 0;
    }
    snprintf(err, errlen, "the kernel's answer about the peer socket is malformed or empty");
    return -EPROTO;
}

/* Fills `id` from a socket address: its address and port (network order). */
static unsigned sockid_part(const struct sockaddr *sa, __be32 addr[4], __be16 *port)
{
    memset(addr, 0, 16);
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in4 = (const struct sockaddr_in *)sa;
        memcpy(&addr[0], &in4->sin_addr, 4);
        *port = in4->sin_port;
        return AF_INET;
    }
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
    *port = in6->sin6_port;
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
        memcpy(&addr[0], &in6->sin6_addr.s6_addr[12], 4);
        return AF_INET;
    }
    memcpy(addr, &in6->sin6_addr, 16);
    return AF_INET6;
}

/* Sends the request on a new NETLINK_SOCK_DIAG socket and reads the answer. */
static ssize_t ask_kernel(const struct inet_diag_req_v2 *req, void *buf, size_t len,
                          char *err, size_t errlen)
{
    struct {
        struct nlmsghdr h;
        struct inet_diag_req_v2 r;
    } msg = {
        .h = {.nlmsg_len = sizeof(msg), .nlmsg_type = SOCK_DIAG_BY_FAMILY,
              .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = 1},
        .r = *req,
    };
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    struct timeval tv = {.tv_sec = PEER_UID_TIMEOUT_MS / 1000,
                         .tv_usec = (PEER_UID_TIMEOUT_MS % 1000) * 1000};
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    ssize_t n = -1;
    if (fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0 &&
        sendto(fd, &msg, sizeof(msg), 0, (struct sockaddr *)&kernel, sizeof(kernel)) >= 0)
        n = recv(fd, buf, len, 0);
    int e = errno;
    if (fd >= 0)
        close(fd);
    if (n < 0) {
        snprintf(err, errlen, "ask the kernel (NETLINK_SOCK_DIAG) who owns the peer socket: %s",
                 strerror(e));
        return -e;
    }
    return n;
}

int peer_uid_lookup(const struct sockaddr *local, const struct sockaddr *peer, uid_t *uid,
                    char *err, size_t errlen)
{
    if ((local->sa_family != AF_INET && local->sa_family != AF_INET6) ||
        local->sa_family != peer->sa_family) {
        snprintf(err, errlen, "not a TCP/IP connection (address family %u)",
                 (unsigned)peer->sa_family);
        return -EAFNOSUPPORT;
    }
    /* The peer socket's own view: its source is the peer's address, its
     * destination ours. */
    struct inet_diag_req_v2 req = {.sdiag_protocol = IPPROTO_TCP, .idiag_states = ~0u};
    req.id.idiag_cookie[0] = req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    unsigned family = sockid_part(peer, req.id.idiag_src, &req.id.idiag_sport);
    if (sockid_part(local, req.id.idiag_dst, &req.id.idiag_dport) != family) {
        snprintf(err, errlen, "the connection mixes IPv4 and IPv6 addresses");
        return -EAFNOSUPPORT;
    }
    req.sdiag_family = (__u8)family;
    /* An inet_diag_msg, and room for a few more in case the kernel adds
     * attributes; aligned as netlink headers want. */
    union {
        struct nlmsghdr h;
        char bytes[4096];
    } answer;
    ssize_t n = ask_kernel(&req, &answer, sizeof(answer), err, errlen);
    if (n < 0)
        return (int)n;
    return peer_uid_parse_reply(&answer, (size_t)n, family, &req.id, uid, err, errlen);
}

int peer_uid_of_socket(int fd, uid_t *uid, char *err, size_t errlen)
{
    struct sockaddr_storage local, peer;
    socklen_t llen = sizeof(local), plen = sizeof(peer);
    if (getsockname(fd, (struct sockaddr *)&local, &llen) != 0 ||
        getpeername(fd, (struct sockaddr *)&peer, &plen) != 0) {
        int e = errno;
        snprintf(err, errlen, "the addresses of the connection: %s", strerror(e));
        return -e;
    }
    return peer_uid_lookup((struct sockaddr *)&local, (struct sockaddr *)&peer, uid, err, errlen);
}
