/*
 * peer_uid.h - the uid on the other end of a local TCP connection.
 *
 * TCP has no SO_PEERCRED, but when both ends are on this host the kernel
 * knows the peer socket: NETLINK_SOCK_DIAG (inet_diag, what `ss -e` shows)
 * answers, for a connection's 4-tuple, the owner uid of the socket at the
 * other end: the fsuid of whoever created it.
 */
#ifndef HEAPPROF_PEER_UID_H
#define HEAPPROF_PEER_UID_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <linux/inet_diag.h>

/*
 * The owner uid of the socket connected to ours from `peer` (our end being
 * `local`; both AF_INET or AF_INET6, IPv4-mapped addresses taken as IPv4).
 * 0 and *uid, or -errno with a reason in `err`: -ENOENT when the peer
 * socket is gone or belongs to no process any more (closed, in TIME_WAIT:
 * the kernel reports uid 0 for those, so they must never count as root).
 */
int peer_uid_lookup(const struct sockaddr *local, const struct sockaddr *peer, uid_t *uid,
                    char *err, size_t errlen);

/* peer_uid_lookup() on a connected TCP socket (getsockname, getpeername). */
int peer_uid_of_socket(int fd, uid_t *uid, char *err, size_t errlen);

/*
 * Reads the kernel's answer to the lookup of the socket `want` (family
 * `family`): one inet_diag_msg for exactly that 4-tuple, owned by a live
 * socket. 0 and *uid, or -errno with a reason. Separate from the lookup so
 * that it can be tested on answers the kernel does not give on demand.
 */
int peer_uid_parse_reply(const void *buf, size_t len, unsigned family,
                         const struct inet_diag_sockid *want, uid_t *uid, char *err,
                         size_t errlen);

#endif
