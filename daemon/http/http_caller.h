/*
 * http_caller.h - who sent a request, per connection: the caller of a
 * loopback TCP or unix socket connection is looked up once, at its first
 * request that needs it, and kept as MHD's socket context for the
 * connection's lifetime (a connected peer socket keeps its owner).
 */
#ifndef HEAPPROF_HTTP_CALLER_H
#define HEAPPROF_HTTP_CALLER_H

#include <microhttpd.h>

#include "access.h"

/* MHD's connection notifier (MHD_OPTION_NOTIFY_CONNECTION): makes and
 * frees the per-connection record. */
void http_caller_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                        enum MHD_ConnectionNotificationCode toe);

/*
 * The caller at the other end of `conn`, which came in through a listener
 * of kind `via` (tcp, unix or open-loopback) named `listener` (kept, not
 * copied), resolved against `trust`. NULL with the reason in *why if it is
 * unknown: the request must then be refused, never guessed. The caller
 * lives as long as the connection.
 */
const struct caller *http_caller_of(struct MHD_Connection *conn, enum access_via via,
                                    const struct access_trust *trust, const char *listener,
                                    const char **why);

#endif
