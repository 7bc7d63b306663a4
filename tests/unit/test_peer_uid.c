/*
 * test_peer_uid.c - the uid at the other end of a loopback TCP connection
 * (daemon/access/peer_uid.c), through the real kernel's sock_diag on real
 * connections: IPv4, IPv6, a peer socket made by another uid, a closed
 * peer, a 4-tuple nobody has; and the checks on the kernel's answer, on
 * answers made here. tests/integration/test_access.py does it end to end
 * with users made for it; the rest of access/ is test_access.c's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/netlink.h>
#include <linux/sock_diag.h>

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

static void the_peer_of_a_loopback_connection_is_its_owner(int family)
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

static void the_peer_of_a_loopback_connection_over_ipv4_is_its_owner(void)
{
    the_peer_of_a_loopback_connection_is_its_owner(AF_INET);
}

static void the_peer_of_a_loopback_connection_over_ipv6_is_its_owner(void)
{
    the_peer_of_a_loopback_connection_is_its_owner(AF_INET6);
}

/* A peer socket made by a child running as uid 65534 (root only: the one
 * case where the owner differs from the caller's). */
static void the_owner_is_whoever_made_the_peer_socket(void)
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

static void a_four_tuple_nobody_has_is_not_found(void)
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

static void the_answer_must_name_the_socket_asked_for_and_a_live_one(void)
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

int main(void)
{
    RUN_TEST(the_peer_of_a_loopback_connection_over_ipv4_is_its_owner);
    RUN_TEST(the_peer_of_a_loopback_connection_over_ipv6_is_its_owner);
    RUN_TEST(the_owner_is_whoever_made_the_peer_socket);
    RUN_TEST(a_four_tuple_nobody_has_is_not_found);
    RUN_TEST(the_answer_must_name_the_socket_asked_for_and_a_live_one);
    return check_exit_code();
}
