/*
 * test_access_policy.c - who a caller is and what it may profile
 * (daemon/access/): the peer socket's uid through the real kernel's
 * sock_diag on real loopback connections (IPv4, IPv6, a closed peer, a
 * 4-tuple nobody has), the checks on the kernel's answer (on answers made
 * here), the ownership rule, trust by uid and group, and the audit line.
 * The integration test (tests/integration/test_access.py) does the same
 * end to end with users made for it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/netlink.h>
#include <linux/sock_diag.h>

#include "access.h"
#include "check.h"
#include "peer_uid.h"

/* A connected loopback TCP pair of `family`: *client and *server (the accepted end). */
static int loopback_pair(int family, int *client, int *server)
{
    struct sockaddr_storage ss = {0};
    socklen_t len;
    if (family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof(*a);
    } else {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_loopback;
        len = sizeof(*a);
    }
    int l = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l < 0 || bind(l, (struct sockaddr *)&ss, len) != 0 || listen(l, 4) != 0 ||
        getsockname(l, (struct sockaddr *)&ss, &len) != 0)
        return -errno;
    *client = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (*client < 0 || connect(*client, (struct sockaddr *)&ss, len) != 0)
        return -errno;
    *server = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    close(l);
    return *server < 0 ? -errno : 0;
}

static void test_the_peer_of_a_loopback_connection_is_its_owner(int family)
{
    int client = -1, server = -1;
    char err[256] = "";
    uid_t uid = (uid_t)-1;
    CHECK_INT_EQ(loopback_pair(family, &client, &server), 0);
    CHECK_INT_EQ(peer_uid_of_socket(server, &uid, err, sizeof(err)), 0);
    CHECK_INT_EQ(uid, geteuid());
    /* The client's end is a peer too: its peer (our server end) is ours. */
    CHECK_INT_EQ(peer_uid_of_socket(client, &uid, err, sizeof(err)), 0);
    CHECK_INT_EQ(uid, geteuid());
    /* Closed, the peer socket belongs to no process: never taken as root. */
    close(client);
    int e = peer_uid_of_socket(server, &uid, err, sizeof(err));
    CHECK_INT_EQ(e, -ENOENT);
    if (e != -ENOENT)
        fprintf(stderr, "  closed peer (family %d): uid %u, %s\n", family, (unsigned)uid, err);
    close(server);
}

/* A peer socket made by a child running as uid 65534 (root only: the one
 * case where the owner differs from the caller's). */
static void test_the_owner_is_whoever_made_the_peer_socket(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "  not root: the other-uid case is left to test_access.py\n");
        return;
    }
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    CHECK(l >= 0 && bind(l, (struct sockaddr *)&a, len) == 0 && listen(l, 1) == 0 &&
          getsockname(l, (struct sockaddr *)&a, &len) == 0);
    int go[2];
    CHECK_INT_EQ(pipe(go), 0);
    pid_t child = fork();
    if (child == 0) {
        char byte;
        int c = -1;
        if (setresgid(65534, 65534, 65534) == 0 && setresuid(65534, 65534, 65534) == 0 &&
            (c = socket(AF_INET, SOCK_STREAM, 0)) >= 0)
            connect(c, (struct sockaddr *)&a, len);
        read(go[0], &byte, 1); /* keep the socket open until the parent looked */
        _exit(0);
    }
    int server = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    uid_t uid = 0;
    char err[256] = "";
    CHECK(server >= 0);
    CHECK_INT_EQ(peer_uid_of_socket(server, &uid, err, sizeof(err)), 0);
    CHECK_INT_EQ(uid, 65534);
    CHECK_INT_EQ(write(go[1], "x", 1), 1);
    waitpid(child, NULL, 0);
    close(server);
    close(l);
    close(go[0]);
    close(go[1]);
}

static void test_a_four_tuple_nobody_has_is_not_found(void)
{
    struct sockaddr_in local = {.sin_family = AF_INET, .sin_port = htons(1),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sockaddr_in peer = local;
    peer.sin_port = htons(2);
    uid_t uid = 12345;
    char err[256] = "";
    CHECK_INT_EQ(peer_uid_lookup((struct sockaddr *)&local, (struct sockaddr *)&peer, &uid, err,
                                 sizeof(err)),
                 -ENOENT);
    CHECK_INT_EQ(uid, 12345);
    CHECK(strstr(err, "no socket") != NULL);
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6};
    CHECK_INT_EQ(peer_uid_lookup((struct sockaddr *)&local, (struct sockaddr *)&v6, &uid, err,
                                 sizeof(err)),
                 -EAFNOSUPPORT);
}

/* A kernel answer: one inet_diag_msg for `id`, as the kernel writes it. */
struct answer {
    struct nlmsghdr h;
    struct inet_diag_msg m;
};

static struct answer make_answer(unsigned family, const struct inet_diag_sockid *id,
                                 uint32_t inode, uint32_t uid)
{
    struct answer a = {.h = {.nlmsg_len = sizeof(a), .nlmsg_type = SOCK_DIAG_BY_FAMILY}};
    a.m.idiag_family = (uint8_t)family;
    a.m.idiag_state = 1; /* TCP_ESTABLISHED */
    a.m.id = *id;
    a.m.idiag_inode = inode;
    a.m.idiag_uid = uid;
    return a;
}

static void test_the_answer_must_name_the_socket_asked_for_and_a_live_one(void)
{
    struct inet_diag_sockid want = {.idiag_sport = htons(40000), .idiag_dport = htons(6060)};
    want.idiag_src[0] = want.idiag_dst[0] = htonl(INADDR_LOOPBACK);
    char err[256];
    uid_t uid = 7;
    struct answer a = make_answer(AF_INET, &want, 99, 1001);
    CHECK_INT_EQ(peer_uid_parse_reply(&a, sizeof(a), AF_INET, &want, &uid, err, sizeof(err)), 0);
    CHECK_INT_EQ(uid, 1001);
    /* A socket no file holds (closed, TIME_WAIT): uid 0 there means nothing. */
    a = make_answer(AF_INET, &want, 0, 0);
    uid = 7;
    CHECK_INT_EQ(peer_uid_parse_reply(&a, sizeof(a), AF_INET, &want, &uid, err, sizeof(err)),
                 -ENOENT);
    CHECK_INT_EQ(uid, 7);
    /* Another socket (a listener on the port): refused. */
    struct inet_diag_sockid other = want;
    other.idiag_dport = 0;
    a = make_answer(AF_INET, &other, 99, 0);
    CHECK_INT_EQ(peer_uid_parse_reply(&a, sizeof(a), AF_INET, &want, &uid, err, sizeof(err)),
                 -ENOENT);
    /* An AF_INET6 socket connected to an IPv4 address answers in mapped form. */
    struct inet_diag_sockid mapped = want;
    memset(mapped.idiag_src, 0, 16);
    memset(mapped.idiag_dst, 0, 16);
    ((unsigned char *)mapped.idiag_src)[10] = ((unsigned char *)mapped.idiag_src)[11] = 0xff;
    ((unsigned char *)mapped.idiag_dst)[10] = ((unsigned char *)mapped.idiag_dst)[11] = 0xff;
    mapped.idiag_src[3] = mapped.idiag_dst[3] = htonl(INADDR_LOOPBACK);
    a = make_answer(AF_INET6, &mapped, 99, 1002);
    CHECK_INT_EQ(peer_uid_parse_reply(&a, sizeof(a), AF_INET, &want, &uid, err, sizeof(err)), 0);
    CHECK_INT_EQ(uid, 1002);
    /* Cut short, empty, or an error from the kernel. */
    CHECK_INT_EQ(peer_uid_parse_reply(&a, sizeof(a) - 4, AF_INET, &want, &uid, err, sizeof(err)),
                 -EPROTO);
    CHECK_INT_EQ(peer_uid_parse_reply(&a, 0, AF_INET, &want, &uid, err, sizeof(err)), -EPROTO);
    struct {
        struct nlmsghdr h;
        struct nlmsgerr e;
    } no = {.h = {.nlmsg_len = sizeof(no), .nlmsg_type = NLMSG_ERROR}, .e = {.error = -ENOENT}};
    CHECK_INT_EQ(peer_uid_parse_reply(&no, sizeof(no), AF_INET, &want, &uid, err, sizeof(err)),
                 -ENOENT);
}

static void test_the_ownership_rule(void)
{
    struct caller c = {.via = ACCESS_VIA_TCP, .has_uid = 1, .uid = 1001, .ngids = 2,
                       .gids = {1001, 27}};
    unsigned mine[3] = {1001, 1001, 1001}, own_group[3] = {1001, 1001, 1001};
    unsigned sudo_group[3] = {27, 27, 27}, setgid[3] = {1001, 50, 50};
    unsigned other_group[3] = {50, 50, 50}, setuid[3] = {1001, 0, 0};
    CHECK_INT_EQ(access_ids_allow(&c, mine, own_group), 0);
    CHECK_INT_EQ(access_ids_allow(&c, mine, sudo_group), 0);
    CHECK_INT_EQ(access_ids_allow(&c, mine, setgid), -EACCES);
    CHECK_INT_EQ(access_ids_allow(&c, mine, other_group), -EACCES);
    CHECK_INT_EQ(access_ids_allow(&c, setuid, own_group), -EACCES);
    c.trusted = 1;
    CHECK_INT_EQ(access_ids_allow(&c, setuid, other_group), 0);
    struct caller unknown = {.via = ACCESS_VIA_TCP};
    CHECK_INT_EQ(access_ids_allow(&unknown, mine, own_group), -EACCES);
    /* A real process, found through the unix socket's peer credentials:
     * this one is its own (even untrusted); pid 0 is nobody's. */
    int sv[2];
    char err[256];
    struct caller self;
    CHECK_INT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    CHECK_INT_EQ(access_identify_unix(sv[0], NULL, &self, err, sizeof(err)), 0);
    CHECK_INT_EQ(self.uid, geteuid());
    CHECK_INT_EQ(self.trusted, geteuid() == 0);
    self.trusted = 0;
    CHECK_INT_EQ(access_may_profile(&self, getpid()), 0);
    CHECK_INT_EQ(access_may_profile(&self, 0), -ESRCH);
    close(sv[0]);
    close(sv[1]);
}

static void test_trust_by_uid_and_by_group(void)
{
    struct access_trust t = {0};
    CHECK_INT_EQ(access_trust_add_uid(&t, "root"), 0);
    CHECK_INT_EQ(access_trust_add_uid(&t, "0"), 0); /* the same uid, kept once */
    CHECK_INT_EQ(t.nuids, 1);
    CHECK_INT_EQ(access_trust_add_uid(&t, "no-such-user-of-heapprofd"), -EINVAL);
    CHECK_INT_EQ(access_trust_add_group(&t, "no-such-group-of-heapprofd"), -EINVAL);
    CHECK_INT_EQ(access_trust_add_uid(&t, "4294967295"), -EINVAL);
    for (unsigned i = 1; i < ACCESS_MAX_TRUSTED; i++) {
        char v[16];
        snprintf(v, sizeof(v), "%u", 100000 + i);
        CHECK_INT_EQ(access_trust_add_uid(&t, v), 0);
    }
    CHECK_INT_EQ(access_trust_add_uid(&t, "99"), -EINVAL);

    struct passwd *nobody = getpwnam("nobody");
    CHECK(nobody != NULL);
    if (!nobody)
        return;
    struct caller c = {.via = ACCESS_VIA_TCP, .uid = nobody->pw_uid};
    access_resolve(&c, NULL);
    CHECK(c.has_uid && !c.trusted);
    CHECK(c.ngids >= 1 && c.gids[0] == nobody->pw_gid);
    struct access_trust by_group = {0};
    char gid[16];
    snprintf(gid, sizeof(gid), "%u", (unsigned)nobody->pw_gid);
    CHECK_INT_EQ(access_trust_add_group(&by_group, gid), 0);
    struct caller member = {.via = ACCESS_VIA_TCP, .uid = nobody->pw_uid};
    access_resolve(&member, &by_group);
    CHECK(member.trusted);
    struct access_trust by_uid = {.uids = {nobody->pw_uid}, .nuids = 1};
    struct caller named = {.via = ACCESS_VIA_TCP, .uid = nobody->pw_uid};
    access_resolve(&named, &by_uid);
    CHECK(named.trusted);
    struct caller root = {.via = ACCESS_VIA_TCP, .uid = 0};
    access_resolve(&root, NULL);
    CHECK(root.trusted);
}

static void test_the_audit_line_is_one_line_of_fields(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    struct caller c = {.via = ACCESS_VIA_TCP, .listener = "127.0.0.1:6060", .has_uid = 1,
                       .uid = 1001};
    access_audit_attach(f, &c, 42, "a\"b\nc d", "uprobe");
    struct caller token = {.via = ACCESS_VIA_TOKEN, .listener = "0.0.0.0:6060", .trusted = 1};
    access_audit_attach(f, &token, 43, "x", "inprocess");
    fclose(f);
    const char *want = "heapprofd: audit: attach pid=42 comm=\"a\\\"b\\x0ac d\" sampler=uprobe "
                       "uid=1001 via=tcp listener=\"127.0.0.1:6060\" trusted=no\n"
                       "heapprofd: audit: attach pid=43 comm=\"x\" sampler=inprocess uid=- "
                       "via=token listener=\"0.0.0.0:6060\" trusted=yes\n";
    CHECK(text && strcmp(text, want) == 0);
    if (text && strcmp(text, want) != 0)
        fprintf(stderr, "  got:\n%s  want:\n%s", text, want);
    free(text);
}

static void test_tokens(void)
{
    const char *token = "0123456789abcdef";
    CHECK(access_token_matches("Bearer 0123456789abcdef", token));
    CHECK(!access_token_matches("Bearer 0123456789abcde", token));
    CHECK(!access_token_matches("Bearer 0123456789abcdefg", token));
    CHECK(!access_token_matches("Basic 0123456789abcdef", token));
    CHECK(!access_token_matches(NULL, token));
}

int main(void)
{
    test_the_peer_of_a_loopback_connection_is_its_owner(AF_INET);
    test_the_peer_of_a_loopback_connection_is_its_owner(AF_INET6);
    test_the_owner_is_whoever_made_the_peer_socket();
    test_a_four_tuple_nobody_has_is_not_found();
    test_the_answer_must_name_the_socket_asked_for_and_a_live_one();
    test_the_ownership_rule();
    test_trust_by_uid_and_by_group();
    test_the_audit_line_is_one_line_of_fields();
    test_tokens();
    return check_exit_code();
}
