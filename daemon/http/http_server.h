/*
 * http_server.h - heapprofd's HTTP interface (libmicrohttpd, one thread per
 * connection so a delta profile's wait blocks no one else):
 * /debug/pprof/heap, /debug/pprof/allocs, /debug/pprof/, /metrics, /healthz.
 * See docs/http-api.md.
 */
#ifndef HEAPPROF_HTTP_SERVER_H
#define HEAPPROF_HTTP_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "access.h"
#include "daemon_ctx.h"

/* Most connections served at once; more wait in the kernel's backlog. */
#define HTTP_MAX_CONNECTIONS 64
/* Seconds an idle connection is kept. */
#define HTTP_IDLE_TIMEOUT 30

/* Per-connection memory MHD may use for a request's headers and query:
 * profile requests are short, so a bigger request is refused. */
#define HTTP_CONNECTION_MEMORY (32 * 1024)

struct http_server;

/* Where and how to listen. */
struct http_listen {
    const char *host;       /* TCP address; loopback unless allow_remote */
    uint16_t port;
    int allow_remote;       /* a non-loopback host is refused unless set */
    const char *token;      /* TCP requests need "Authorization: Bearer TOKEN"; NULL: none */
    const char *unix_path;  /* a unix socket listener too (peer credentials); NULL: none */
    const struct access_trust *trust; /* trusted besides root (copied); NULL: none */
    int open_loopback;      /* TCP callers are not identified: all trusted */
};

/* Starts serving; -errno with a reason in `err` if it cannot. */
int http_server_start(struct daemon_ctx *ctx, const struct http_listen *how,
                      struct http_server **out, char *err, size_t errlen);
/* Stops serving and waits for the connections' threads. */
void http_server_stop(struct http_server *s);

/* The HTTP status for an -errno from attaching to a process, building its
 * profile or keeping a snapshot of it. */
unsigned http_status_of(int e);

#endif
