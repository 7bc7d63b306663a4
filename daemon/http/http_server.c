/*
 * http_server.c - routes HTTP requests to the profile, index, metrics and
 * health handlers, and turns errors into status codes with one-line reasons
 * (see http_server.h). What a page says is written elsewhere (index_html.c,
 * targets_json.c, metrics.c): here every answer but the web page's built-in
 * files (served from the binary as they are) goes out through respond().
 */
#include "http_server.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <microhttpd.h>

#include "access.h"
#include "caller_limits.h"
#include "http_caller.h"
#include "http_history.h"
#include "index_html.h"
#include "metrics.h"
#include "net_addr.h"
#include "pprof.h"
#include "profile_diff.h"
#include "profile_request.h"
#include "query.h"
#include "strbuf.h"
#include "targets_json.h"
#include "web_assets.h"

/* One listening socket and how its callers are identified. */
struct listener {
    struct daemon_ctx *ctx;
    enum access_via via;    /* tcp (peer uid), unix, token or open-loopback */
    const char *token;      /* required bearer token, or NULL */
    const struct access_trust *trust;
    struct caller token_caller; /* who presents the token: trusted, no uid */
    char name[128];         /* "127.0.0.1:6060" or the socket path, for the audit */
    struct caller_limits *limits; /* the server's, shared by its listeners */
    struct MHD_Daemon *mhd;
};

struct http_server {
    struct caller_limits limits;
    struct listener tcp;
    struct listener unix_sock;
    struct access_trust trust;
    char token[ACCESS_MAX_TOKEN + 1];
    char unix_path[108];
};

/* A header beyond those every response has. */
struct header {
    const char *name, *value;
};

/* Queues a response that takes ownership of `body` (malloc'd), with the
 * header `extra` if it is not NULL. */
static enum MHD_Result respond(struct MHD_Connection *conn, unsigned status, char *body, size_t len,
                               const char *content_type, const struct header *extra)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", content_type);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    if (extra)
        MHD_add_response_header(r, extra->name, extra->value);
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

/* Queues a text response of one line, counted as an error from 400 on. */
static enum MHD_Result respond_line(struct daemon_ctx *ctx, struct MHD_Connection *conn,
                                    unsigned status, const char *line, const struct header *extra)
{
    if (status >= 400)
        atomic_fetch_add(&ctx->request_errors, 1);
    char *body;
    if (asprintf(&body, "%s\n", line) < 0)
        return MHD_NO;
    return respond(conn, status, body, strlen(body), "text/plain; charset=utf-8", extra);
}

/* Queues a text response of one line. */
static enum MHD_Result respond_text(struct daemon_ctx *ctx, struct MHD_Connection *conn,
                                    unsigned status, const char *line)
{
    return respond_line(ctx, conn, status, line, NULL);
}

/* 401 with the challenge a client needs to know what to send. */
static enum MHD_Result respond_unauthorized(struct daemon_ctx *ctx, struct MHD_Connection *conn)
{
    static const struct header challenge = {"WWW-Authenticate", "Bearer realm=\"heapprofd\""};
    return respond_line(ctx, conn, MHD_HTTP_UNAUTHORIZED,
                        "a bearer token is required: Authorization: Bearer <token>", &challenge);
}

unsigned http_status_of(int e)
{
    switch (e) {
    case -ESRCH:
    case -ENOENT:
        return MHD_HTTP_NOT_FOUND;
    case -EACCES:
    case -EPERM:
        return MHD_HTTP_FORBIDDEN;
    case -ENOEXEC: /* it exists, but has nothing we can probe (a stripped static binary) */
        return MHD_HTTP_UNPROCESSABLE_CONTENT;
    case -ESTALE: /* pid= with a selector it does not match: not the process meant */
    case -EXDEV:  /* base= names a snapshot of another process */
        return MHD_HTTP_CONFLICT;
    case -EBADMSG: /* an uploaded base that is not a profile */
        return MHD_HTTP_BAD_REQUEST;
    case -EFBIG: /* an uploaded base, or a snapshot, too large */
        return MHD_HTTP_CONTENT_TOO_LARGE;
    case -ENOSPC:
    case -EDQUOT:
    case -EAGAIN:
    case -ENODEV: /* BPF unavailable */
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    default:
        return MHD_HTTP_INTERNAL_SERVER_ERROR;
    }
}

/* What parsing the query string collects, for MHD's iterator. */
struct query_parse {
    struct profile_query q;
    int failed;
    char err[160];
};

static enum MHD_Result take_argument(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    (void)kind;
    struct query_parse *qp = cls;
    if (!qp->failed && profile_query_set(&qp->q, key, value, qp->err, sizeof(qp->err)) != 0)
        qp->failed = 1;
    return MHD_YES;
}

/* GET /debug/pprof/heap and /debug/pprof/allocs; POST with a base
 * profile as the body (`up`, else NULL) for its difference from it. */
static enum MHD_Result serve_profile(struct daemon_ctx *ctx, struct MHD_Connection *conn,
                                     const struct caller *who, int default_alloc,
                                     const struct http_upload *up)
{
    struct query_parse qp = {0};
    char err[1280];
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, take_argument, &qp);
    if (qp.failed)
        return respond_text(ctx, conn, MHD_HTTP_BAD_REQUEST, qp.err);
    if (up && up->too_big) {
        snprintf(err, sizeof(err), "the uploaded base is over %u MiB",
                 PROFILE_DIFF_MAX_BASE_BYTES >> 20);
        return respond_text(ctx, conn, MHD_HTTP_CONTENT_TOO_LARGE, err);
    }
    if (up) {
        qp.q.base_upload = up->body.data ? up->body.data : (const uint8_t *)"";
        qp.q.base_upload_len = up->body.len;
    }
    if (profile_query_finish(&qp.q, err, sizeof(err)) != 0)
        return respond_text(ctx, conn, MHD_HTTP_BAD_REQUEST, err);
    struct profile_answer a;
    int e = profile_request_answer(ctx, &qp.q, who, default_alloc, &a, err, sizeof(err));
    if (e)
        return respond_text(ctx, conn, http_status_of(e), err);
    if (!a.body.data) /* an empty text profile still needs a buffer to hand over */
        a.body.data = calloc(1, 1);
    return respond(conn, MHD_HTTP_OK, (char *)a.body.data, a.body.len, a.content_type, NULL);
}

/* GET /debug/pprof/?format=json: the profiled processes `who` may see, for the web page. */
static enum MHD_Result serve_index_json(struct daemon_ctx *ctx, struct MHD_Connection *conn,
                                        const struct caller *who)
{
    struct strbuf b = {0};
    int e = targets_json_write(ctx, who, &b);
    if (e) {
        strbuf_free(&b);
        char err[96];
        snprintf(err, sizeof(err), "list the profiled processes: %s", strerror(-e));
        return respond_text(ctx, conn, MHD_HTTP_INTERNAL_SERVER_ERROR, err);
    }
    return respond(conn, MHD_HTTP_OK, b.data, b.len, "application/json", NULL);
}

/* GET /debug/pprof/history and POST /debug/pprof/snapshot (http_history.h). */
static enum MHD_Result serve_history(struct daemon_ctx *ctx, struct MHD_Connection *conn,
                                     const struct caller *who, int snapshot)
{
    struct strbuf b = {0};
    const char *pid = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "pid");
    unsigned status = snapshot ? http_snapshot_serve(ctx, who, pid, &b)
                               : http_history_serve(ctx, who, pid, &b);
    if (status >= 400) {
        enum MHD_Result r = respond_text(ctx, conn, status, b.data ? b.data : "error");
        strbuf_free(&b);
        return r;
    }
    return respond(conn, status, b.data, b.len, "application/json", NULL);
}

/* Frees what a request collected (MHD's completion callback). */
static void request_done(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode code)
{
    (void)cls;
    (void)conn;
    (void)code;
    if (*req_cls && *req_cls != (void *)1)
        http_upload_free(*req_cls);
    *req_cls = NULL;
}

/* A file of the web page, from the binary. Scripts only from here: the page
 * shows function names, which a profiled program chooses. */
static enum MHD_Result serve_web_asset(struct MHD_Connection *conn, const struct web_asset *a)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        (size_t)(a->end - a->data), (void *)a->data, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", a->content_type);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    /* d3-flame-graph adds its stylesheet as a <style> element: inline styles allowed. */
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'self'; style-src 'self' 'unsafe-inline'; "
                            "img-src 'self' data:; frame-ancestors 'none'");
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* GET /debug/pprof/: the profiled processes `who` may profile, with links. */
static enum MHD_Result serve_index(struct daemon_ctx *ctx, struct MHD_Connection *conn,
                                   const struct caller *who)
{
    struct strbuf b = {0};
    int e = index_html_write(ctx, who, &b);
    if (e) {
        strbuf_free(&b);
        char err[96];
        snprintf(err, sizeof(err), "list the profiled processes: %s", strerror(-e));
        return respond_text(ctx, conn, MHD_HTTP_INTERNAL_SERVER_ERROR, err);
    }
    return respond(conn, MHD_HTTP_OK, b.data, b.len, "text/html; charset=utf-8", NULL);
}

/* GET /metrics, with the per-process series of the processes `who` may profile. */
static enum MHD_Result serve_metrics(struct daemon_ctx *ctx, struct MHD_Connection *conn,
                                     const struct caller *who)
{
    struct strbuf b = {0};
    int e = metrics_write(ctx, who, &b);
    if (e) {
        char err[128];
        snprintf(err, sizeof(err), "write the metrics: %s", strerror(-e));
        strbuf_free(&b);
        return respond_text(ctx, conn, MHD_HTTP_INTERNAL_SERVER_ERROR, err);
    }
    return respond(conn, MHD_HTTP_OK, b.data, b.len, "text/plain; version=0.0.4; charset=utf-8",
                   NULL);
}

static enum MHD_Result route(struct listener *l, struct MHD_Connection *conn, const char *url,
                             const struct http_upload *up, int snapshot, const struct caller *who);

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **req_cls)
{
    (void)version;
    struct listener *l = cls;
    struct daemon_ctx *ctx = l->ctx;
    int post = strcmp(method, "POST") == 0;
    /* MHD calls once for the headers, then once per piece of a body, then
     * once to answer. A POST's body is collected (a base profile). */
    if (*req_cls == NULL) {
        *req_cls = post ? calloc(1, sizeof(struct http_upload)) : (void *)1;
        return *req_cls ? MHD_YES : MHD_NO;
    }
    if (*upload_data_size) {
        if (post)
            http_upload_add(*req_cls, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    atomic_fetch_add(&ctx->requests, 1);
    if (!post && strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return respond_text(ctx, conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and POST are served");
    int snapshot = strcmp(url, "/debug/pprof/snapshot") == 0;
    if (post && !snapshot && strcmp(url, "/debug/pprof/heap") != 0 &&
        strcmp(url, "/debug/pprof/allocs") != 0)
        return respond_text(ctx, conn, MHD_HTTP_METHOD_NOT_ALLOWED,
                            "POST is for /debug/pprof/heap and /allocs (a base profile as the "
                            "body) and /debug/pprof/snapshot");
    if (!post && snapshot)
        return respond_text(ctx, conn, MHD_HTTP_METHOD_NOT_ALLOWED,
                            "/debug/pprof/snapshot takes POST: it keeps a profile");
    if (strcmp(url, "/healthz") == 0)
        return respond_text(ctx, conn, MHD_HTTP_OK, "ok");
    const struct caller *who = &l->token_caller;
    if (l->via == ACCESS_VIA_TOKEN) {
        const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
        if (!access_token_matches(auth, l->token))
            return respond_unauthorized(ctx, conn);
    } else {
        const char *why;
        who = http_caller_of(conn, l->via, l->trust, l->name, &why);
        if (!who)
            return respond_text(ctx, conn, MHD_HTTP_FORBIDDEN, why);
    }
    if (strcmp(url, "/metrics") == 0)
        return serve_metrics(ctx, conn, who);
    if (who->trusted)
        return route(l, conn, url, post ? *req_cls : NULL, snapshot, who);
    /* An untrusted caller's requests are counted while they run, so that
     * its delta windows cannot take every connection. */
    char why[256];
    if (caller_limits_enter(l->limits, who->uid, why, sizeof(why)) != 0)
        return respond_text(ctx, conn, MHD_HTTP_TOO_MANY_REQUESTS, why);
    enum MHD_Result r = route(l, conn, url, post ? *req_cls : NULL, snapshot, who);
    caller_limits_leave(l->limits, who->uid);
    return r;
}

/* Answers a request past its caller's identification and limits. */
static enum MHD_Result route(struct listener *l, struct MHD_Connection *conn, const char *url,
                             const struct http_upload *up, int snapshot, const struct caller *who)
{
    struct daemon_ctx *ctx = l->ctx;
    if (strcmp(url, "/debug/pprof/") == 0 || strcmp(url, "/debug/pprof") == 0) {
        const char *format = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "format");
        if (format && strcmp(format, "json") == 0)
            return serve_index_json(ctx, conn, who);
        if (format && strcmp(format, "html") != 0)
            return respond_text(ctx, conn, MHD_HTTP_BAD_REQUEST,
                                "bad format for the index: want json or html");
        return serve_index(ctx, conn, who);
    }
    if (strcmp(url, "/debug/pprof/heap") == 0)
        return serve_profile(ctx, conn, who, 0, up);
    if (strcmp(url, "/debug/pprof/allocs") == 0)
        return serve_profile(ctx, conn, who, 1, up);
    if (snapshot || strcmp(url, "/debug/pprof/history") == 0)
        return serve_history(ctx, conn, who, snapshot);
    const struct web_asset *asset = web_asset_find(url);
    if (asset)
        return serve_web_asset(conn, asset);
    return respond_text(ctx, conn, MHD_HTTP_NOT_FOUND,
                        "not found: try /, /debug/pprof/heap?pid=N, /debug/pprof/, /metrics");
}

/* Starts one MHD daemon for listener `l` on the listening socket `fd`,
 * which it then owns. poll(), not select(): our descriptors (one or more
 * per probe link) can pass FD_SETSIZE, where select() would fail. */
static int start_listener(struct listener *l, int fd)
{
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD;
    l->mhd = MHD_start_daemon(flags, 0, NULL, NULL, handle, l, MHD_OPTION_LISTEN_SOCKET, fd,
                              MHD_OPTION_NOTIFY_CONNECTION, http_caller_notify, NULL,
                              MHD_OPTION_NOTIFY_COMPLETED, request_done, NULL,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_MAX_CONNECTIONS,
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_IDLE_TIMEOUT,
                              MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONNECTION_MEMORY,
                              MHD_OPTION_END);
    /* MHD says nothing of why; the socket is ours until it succeeds. */
    return l->mhd ? 0 : -EIO;
}

/* A listening TCP socket on `ss`; -errno of the call that failed, named in `err`. */
static int open_tcp_socket(const struct sockaddr_storage *ss, const char *host, uint16_t port,
                           char *err, size_t errlen)
{
    int one = 1;
    int v6 = ss->ss_family == AF_INET6;
    socklen_t len = v6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    const char *step = "create a socket";
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        /* SO_REUSEADDR: a restart binds while the old daemon's connections
         * linger in TIME_WAIT. IPV6_V6ONLY: "::" means IPv6 only, whatever
         * the host's bindv6only says. */
        step = "bind";
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
            (!v6 || setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) == 0) &&
            bind(fd, (const struct sockaddr *)ss, len) == 0) {
            step = "listen";
            if (listen(fd, HTTP_MAX_CONNECTIONS) == 0)
                return fd;
        }
    }
    int e = errno;
    snprintf(err, errlen, "listen on %s:%u: %s: %s", host, (unsigned)port, step, strerror(e));
    if (fd >= 0)
        close(fd);
    return -e;
}

/* A listening unix socket at `path` that every local user may connect to:
 * requests are authorized by the peer's credentials, not by the file mode. */
static int open_unix_socket(const char *path, char *err, size_t errlen)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct stat st;
    if (strlen(path) >= sizeof(sa.sun_path)) {
        snprintf(err, errlen, "unix socket path %s is too long", path);
        return -ENAMETOOLONG;
    }
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
        unlink(path); /* left by an earlier run */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || chmod(path, 0666) != 0 ||
        listen(fd, HTTP_MAX_CONNECTIONS) != 0) {
        int e = errno;
        snprintf(err, errlen, "listen on unix socket %s: %s", path, strerror(e));
        if (fd >= 0)
            close(fd);
        return -e;
    }
    return fd;
}

int http_server_start(struct daemon_ctx *ctx, const struct http_listen *how,
                      struct http_server **out, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    if (net_addr_parse(how->host, how->port, &ss) < 0) {
        snprintf(err, errlen, "listen address '%s' is not an IPv4 or IPv6 address", how->host);
        return -EINVAL;
    }
    if (!how->allow_remote && !net_addr_is_loopback(&ss)) {
        snprintf(err, errlen, "refusing to listen on %s, which is not a loopback address: "
                 "profiles expose process internals; set allow-remote (and token-file) to do it",
                 how->host);
        return -EPERM;
    }
    struct http_server *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->tcp.ctx = s->unix_sock.ctx = ctx;
    caller_limits_init(&s->limits);
    s->tcp.limits = s->unix_sock.limits = &s->limits;
    if (how->trust)
        s->trust = *how->trust;
    s->tcp.trust = s->unix_sock.trust = &s->trust;
    snprintf(s->tcp.name, sizeof(s->tcp.name), "%s:%u", how->host, (unsigned)how->port);
    s->tcp.via = how->open_loopback ? ACCESS_VIA_OPEN_LOOPBACK : ACCESS_VIA_TCP;
    if (how->token) {
        snprintf(s->token, sizeof(s->token), "%s", how->token);
        s->tcp.token = s->token;
        s->tcp.via = ACCESS_VIA_TOKEN;
        s->tcp.token_caller =
            (struct caller){.via = ACCESS_VIA_TOKEN, .listener = s->tcp.name, .trusted = 1};
    }
    int fd = open_tcp_socket(&ss, how->host, how->port, err, errlen);
    int e = fd < 0 ? fd : start_listener(&s->tcp, fd);
    if (e) {
        if (fd >= 0) {
            snprintf(err, errlen, "listen on %s:%u: libmicrohttpd would not start", how->host,
                     (unsigned)how->port);
            close(fd);
        }
        caller_limits_destroy(&s->limits);
        free(s);
        return e;
    }
    if (how->unix_path) {
        fd = open_unix_socket(how->unix_path, err, errlen);
        s->unix_sock.via = ACCESS_VIA_UNIX;
        snprintf(s->unix_sock.name, sizeof(s->unix_sock.name), "%s", how->unix_path);
        e = fd < 0 ? fd : start_listener(&s->unix_sock, fd);
        if (e) {
            if (fd >= 0) {
                snprintf(err, errlen, "serve unix socket %s: libmicrohttpd would not start",
                         how->unix_path);
                close(fd);
            }
            MHD_stop_daemon(s->tcp.mhd);
            caller_limits_destroy(&s->limits);
            free(s);
            return e;
        }
        snprintf(s->unix_path, sizeof(s->unix_path), "%s", how->unix_path);
    }
    *out = s;
    return 0;
}

void http_server_stop(struct http_server *s)
{
    if (!s)
        return;
    MHD_stop_daemon(s->tcp.mhd);
    if (s->unix_sock.mhd) {
        MHD_stop_daemon(s->unix_sock.mhd);
        unlink(s->unix_path);
    }
    caller_limits_destroy(&s->limits);
    free(s);
}
