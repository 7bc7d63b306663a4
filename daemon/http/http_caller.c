/*
 * http_caller.c - who sent a request, looked up once per connection (see
 * http_caller.h).
 */
#include "http_caller.h"

#include <stdlib.h>

/* What is known of the other end of one connection. */
struct connection_peer {
    int looked_up;
    int error;          /* -errno: every request is refused with `reason` */
    char reason[320];
    struct caller who;
};

void http_caller_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                        enum MHD_ConnectionNotificationCode toe)
{
    (void)cls;
    (void)conn;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        *socket_context = calloc(1, sizeof(struct connection_peer));
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        free(*socket_context);
        *socket_context = NULL;
    }
}

const struct caller *http_caller_of(struct MHD_Connection *conn, enum access_via via,
                                    const struct access_trust *trust, const char *listener,
                                    const char **why)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct connection_peer *p = ci ? ci->socket_context : NULL;
    if (!p) {
        *why = "out of memory for the connection: who is calling is unknown";
        return NULL;
    }
    if (!p->looked_up) {
        p->looked_up = 1;
        ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        int fd = ci ? ci->connect_fd : -1;
        p->error = via == ACCESS_VIA_UNIX
                       ? access_identify_unix(fd, trust, &p->who, p->reason, sizeof(p->reason))
                       : access_identify_tcp(fd, trust, &p->who, p->reason, sizeof(p->reason));
        p->who.listener = listener;
        if (via == ACCESS_VIA_OPEN_LOOPBACK) {
            /* Everyone is trusted; the uid, when found, is for the audit. */
            p->who.via = ACCESS_VIA_OPEN_LOOPBACK;
            p->who.trusted = 1;
            p->who.has_uid = p->error == 0;
            p->error = 0;
        }
    }
    *why = p->reason;
    return p->error ? NULL : &p->who;
}
