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

#include "daemon_ctx.h"

/* Most connections served at once; more wait in the kernel's backlog. */
#define HTTP_MAX_CONNECTIONS 64
/* Seconds an idle connection is kept. */
#define HTTP_IDLE_TIMEOUT 30

struct http_server;

/* Starts serving on host:port; -errno with a reason in `err` if it cannot. */
int http_server_start(struct daemon_ctx *ctx, const char *host, uint16_t port,
                      struct http_server **out, char *err, size_t errlen);
/* Stops serving and waits for the connections' threads. */
void http_server_stop(struct http_server *s);

#endif
