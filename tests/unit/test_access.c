/*
 * test_access.c - who may profile what (access.c, token.c): which --listen
 * hosts are loopback (IPv4, IPv6, bracketed), the bearer token compare,
 * the token file and its permissions, peer credentials of a unix socket,
 * the ptrace-like ownership rule on processes this test starts (root: it
 * changes their ids, as the daemon's callers differ from it) and on ids
 * given, trust by uid and by group, and the audit line. The peer socket's
 * uid on loopback TCP is test_peer_uid.c's.
 */
#include "access.h"
#include "check.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A uid and gid no account has, for callers and processes that are not root. */
#define STRANGER 4242

static void loopback_addresses_are_told_from_others(void)
{
    static const struct {
        const char *host;
        int loopback;
    } cases[] = {
        {"127.0.0.1", 1},
        {"127.0.0.2", 1}, /* all of 127/8 */
        {"127.255.255.254", 1},
        {"::1", 1},
        {"[::1]", 1},           /* as in --listen [::1]:6060 */
        {"0:0:0:0:0:0:0:1", 1}, /* ::1 written out */
        {"[0:0::1]", 1},
        {"0.0.0.0", 0}, /* every interface */
        {"::", 0},
        {"[::]", 0},
        {"128.0.0.1", 0},
        {"126.255.255.255", 0},
        {"10.0.0.1", 0},
        {"::2", 0},
        {"fe80::1", 0},
        {"localhost", 0}, /* a name, not an address: not resolved */
        {"", 0},
        {"[::1", 0}, /* unbalanced brackets */
        {"::1]", 0},
        {"[[::1]]", 0},
        {"127.1", 0}, /* inet_aton's shorthand is not an address here */
        {"127.0.0.1 ", 0},
        {"127.0.0.1.", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int got = access_is_loopback(cases[i].host);
        if (got != cases[i].loopback) {
            fprintf(stderr, "%s:%d: access_is_loopback(\"%s\"): expected %d, got %d\n", __FILE__,
                    __LINE__, cases[i].host, cases[i].loopback, got);
            check_failures++;
        }
    }
    /* Longer than any address: refused whole, never read cut short. */
    char longer[200];
    memset(longer, ' ', sizeof(longer) - 1);
    longer[sizeof(longer) - 1] = '\0';
    memcpy(longer, "127.0.0.1", 9);
    CHECK_INT_EQ(access_is_loopback(longer), 0);
    memcpy(longer, "[::1]", 5);
    CHECK_INT_EQ(access_is_loopback(longer), 0);
}

static void only_the_exact_bearer_token_matches(void)
{
    static const char token[] = "0123456789abcdef-token";
    static const struct {
        const char *header;
        int matches;
    } cases[] = {
        {"Bearer 0123456789abcdef-token", 1},
        {"Bearer 0123456789abcdef-tokeN", 0}, /* the last byte differs */
        {"Bearer 1123456789abcdef-token", 0}, /* the first byte differs */
        {"Bearer 0123456789abcdef-toke", 0},  /* a prefix */
        {"Bearer 0123456789abcdef-tokenx", 0},
        {"Bearer 0123456789abcdef-token ", 0},
        {"Bearer  0123456789abcdef-token", 0},
        {"Basic 0123456789abcdef-token", 0},
        {"0123456789abcdef-token", 0},
        {"Bearer ", 0},
        {"Bearer", 0},
        {"", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int got = access_token_matches(cases[i].header, token);
        if (got != cases[i].matches) {
            fprintf(stderr, "%s:%d: Authorization \"%s\": expected %d, got %d\n", __FILE__,
                    __LINE__, cases[i].header, cases[i].matches, got);
            check_failures++;
        }
    }
    CHECK_INT_EQ(access_token_matches(NULL, token), 0); /* no header */
}

/* Writes `text` to a new file in `dir` with `mode`; its path goes to `path`. */
static void token_file(const char *dir, const char *text, mode_t mode, char *path, size_t len)
{
    static int serial;
    snprintf(path, len, "%s/token%d", dir, serial++);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    CHECK_INT_EQ(write(fd, text, strlen(text)), (long long)strlen(text));
    CHECK_INT_EQ(fchmod(fd, mode), 0); /* past the umask */
    close(fd);
}

/* Reads a token file made of `text` with `mode`; checks the result, the token or the reason. */
static void check_token_file(const char *dir, const char *text, mode_t mode, size_t outlen,
                             int want, const char *want_token, const char *want_reason)
{
    char path[256], out[300] = "untouched", err[512] = "", reason[600];
    token_file(dir, text, mode, path, sizeof(path));
    int got = access_read_token(path, out, outlen, err, sizeof(err));
    if (got != want) {
        fprintf(stderr, "%s:%d: token file \"%.40s\" mode %o: expected %d, got %d (%s)\n", __FILE__,
                __LINE__, text, (unsigned)mode, want, got, err);
        check_failures++;
    }
    if (want == 0) {
        CHECK_STR_EQ(out, want_token);
    } else {
        snprintf(reason, sizeof(reason), want_reason, path);
        CHECK_STR_EQ(err, reason);
    }
    unlink(path);
}

static void a_token_file_is_one_private_line_of_16_to_256_characters(void)
{
    char dir[] = "/tmp/heapprof_access_XXXXXX", text[300], want[300];
    CHECK(mkdtemp(dir) != NULL);
    static const char *const bad_length = "token file %s: want one line of 16 to 256 characters";
    static const char *const open_to_others = "token file %s is readable by others: chmod 600 it";
    check_token_file(dir, "0123456789abcdef\n", 0600, 300, 0, "0123456789abcdef", NULL);
    check_token_file(dir, "0123456789abcdef", 0400, 300, 0, "0123456789abcdef", NULL);
    check_token_file(dir, "0123456789abcdef\r\n", 0600, 300, 0, "0123456789abcdef", NULL);
    check_token_file(dir, "0123456789abcdef\nsecond line\n", 0600, 300, 0, "0123456789abcdef",
                     NULL);
    check_token_file(dir, "0123456789abcdef\n", 0640, 300, -EPERM, NULL, open_to_others);
    check_token_file(dir, "0123456789abcdef\n", 0604, 300, -EPERM, NULL, open_to_others);
    check_token_file(dir, "0123456789abcdef\n", 0660, 300, -EPERM, NULL, open_to_others);
    check_token_file(dir, "0123456789abcde\n", 0600, 300, -EINVAL, NULL, bad_length);
    check_token_file(dir, "", 0600, 300, -EINVAL, NULL, bad_length);
    check_token_file(dir, "\n0123456789abcdef\n", 0600, 300, -EINVAL, NULL, bad_length);
    /* 16 characters need 17 bytes of room. */
    check_token_file(dir, "0123456789abcdef\n", 0600, 17, 0, "0123456789abcdef", NULL);
    check_token_file(dir, "0123456789abcdef\n", 0600, 16, -EINVAL, NULL, bad_length);
    memset(text, 't', 256);
    memcpy(text + 256, "\n", 2);
    snprintf(want, sizeof(want), "%.256s", text);
    check_token_file(dir, text, 0600, 300, 0, want, NULL);
    memcpy(text + 256, "t\n", 3); /* 257 */
    check_token_file(dir, text, 0600, 300, -EINVAL, NULL, bad_length);

    char missing[300], out[32], err[512], reason[600];
    snprintf(missing, sizeof(missing), "%s/missing", dir);
    CHECK_INT_EQ(access_read_token(missing, out, sizeof(out), err, sizeof(err)), -ENOENT);
    snprintf(reason, sizeof(reason), "token file %s: No such file or directory", missing);
    CHECK_STR_EQ(err, reason);
    CHECK_INT_EQ(rmdir(dir), 0);
}

static void a_unix_socket_peer_is_known_by_its_credentials(void)
{
    int sv[2];
    char err[256] = "";
    CHECK_INT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    struct caller c = {0};
    CHECK_INT_EQ(access_identify_unix(sv[0], NULL, &c, err, sizeof(err)), 0);
    CHECK_INT_EQ(c.via, ACCESS_VIA_UNIX);
    CHECK_INT_EQ(c.has_uid, 1);
    CHECK_INT_EQ(c.uid, getuid());
    CHECK(c.ngids >= 1 && c.gids[0] == getgid()); /* the connecting process's gid first */
    CHECK_INT_EQ(c.trusted, getuid() == 0);
    close(sv[0]);
    close(sv[1]);
    int p[2];
    CHECK_INT_EQ(pipe(p), 0);
    CHECK_INT_EQ(access_identify_unix(p[0], NULL, &c, err, sizeof(err)), -ENOTSOCK);
    CHECK(strstr(err, "peer credentials unknown") != NULL);
    close(p[0]);
    close(p[1]);
}

/* A child whose real, effective and saved ids are these, dumpable or not
 * (changing its ids made it not: a program that drops root's ids and
 * execs nothing stays so); it waits to be killed. */
static pid_t child_with_ids(uid_t ruid, uid_t euid, uid_t suid, gid_t gid, int dumpable,
                            int *ready_fd)
{
    int p[2];
    CHECK_INT_EQ(pipe(p), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        if (setresgid(gid, gid, gid) != 0 || setresuid(ruid, euid, suid) != 0 ||
            prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0) != 0)
            _exit(1);
        char ok = 1;
        if (write(p[1], &ok, 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    close(p[1]);
    *ready_fd = p[0];
    char ok = 0;
    CHECK_INT_EQ(pid > 0 ? read(p[0], &ok, 1) : -1, 1); /* its ids are set */
    return pid;
}

static void stop_child(pid_t pid, int fd)
{
    close(fd);
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
}

static void a_user_may_profile_only_processes_wholly_theirs(void)
{
    /* As access_resolve() leaves them: root trusted; a TCP caller whose
     * peer was not found has no uid. */
    struct caller unknown = {.via = ACCESS_VIA_TCP};
    struct caller root = {.via = ACCESS_VIA_UNIX, .has_uid = 1, .uid = 0, .trusted = 1};
    struct caller stranger = {.via = ACCESS_VIA_TCP, .has_uid = 1, .uid = STRANGER, .ngids = 1,
                              .gids = {STRANGER}};
    struct caller other_group = {.via = ACCESS_VIA_UNIX, .has_uid = 1, .uid = STRANGER,
                                 .ngids = 1, .gids = {STRANGER + 1}};
    int fd_theirs, fd_dropped, fd_undumpable;
    /* The stranger's own process, one that keeps root as its saved uid
     * (a setuid program that dropped privileges for now), and one of its
     * own that is not dumpable (ssh-agent, gpg-agent). */
    pid_t theirs = child_with_ids(STRANGER, STRANGER, STRANGER, STRANGER, 1, &fd_theirs);
    pid_t dropped = child_with_ids(STRANGER, STRANGER, 0, STRANGER, 1, &fd_dropped);
    pid_t undumpable = child_with_ids(STRANGER, STRANGER, STRANGER, STRANGER, 0, &fd_undumpable);
    pid_t self = getpid();

    CHECK_INT_EQ(access_may_profile(&unknown, self), -EACCES); /* never an open door */
    CHECK_INT_EQ(access_may_profile(&unknown, theirs), -EACCES);
    CHECK_INT_EQ(access_may_profile(&root, theirs), 0);
    CHECK_INT_EQ(access_may_profile(&stranger, theirs), 0);
    CHECK_INT_EQ(access_may_profile(&stranger, self), -EACCES);
    CHECK_INT_EQ(access_may_profile(&stranger, dropped), -EACCES);
    CHECK_INT_EQ(access_may_profile(&other_group, theirs), -EACCES);
    CHECK_INT_EQ(access_may_profile(&stranger, undumpable), -EPERM);
    CHECK_INT_EQ(access_may_profile(&root, undumpable), 0);

    stop_child(theirs, fd_theirs);
    stop_child(dropped, fd_dropped);
    stop_child(undumpable, fd_undumpable);
    /* Reaped: gone. A trusted caller is not even checked (whether the pid
     * exists is the attach's to say); another gets -ESRCH. */
    CHECK_INT_EQ(access_may_profile(&root, theirs), 0);
    CHECK_INT_EQ(access_may_profile(&stranger, theirs), -ESRCH);
}

static void the_ownership_rule_on_given_ids(void)
{
    struct caller c = {.via = ACCESS_VIA_TCP, .has_uid = 1, .uid = 1001, .ngids = 2,
                       .gids = {1001, 27}};
    unsigned mine[3] = {1001, 1001, 1001}, own_group[3] = {1001, 1001, 1001};
    unsigned sudo_group[3] = {27, 27, 27}, setgid[3] = {1001, 50, 50};
    unsigned other_group[3] = {50, 50, 50}, setuid[3] = {1001, 0, 0};
    CHECK_INT_EQ(access_ids_allow(&c, mine, own_group), 0);
    CHECK_INT_EQ(access_ids_allow(&c, mine, sudo_group), 0); /* a group it belongs to */
    CHECK_INT_EQ(access_ids_allow(&c, mine, setgid), -EACCES);
    CHECK_INT_EQ(access_ids_allow(&c, mine, other_group), -EACCES);
    CHECK_INT_EQ(access_ids_allow(&c, setuid, own_group), -EACCES);
    c.trusted = 1;
    CHECK_INT_EQ(access_ids_allow(&c, setuid, other_group), 0);
}

static void trust_by_uid_and_by_group(void)
{
    struct access_trust t = {0};
    CHECK_INT_EQ(access_trust_add_uid(&t, "root"), 0);
    CHECK_INT_EQ(access_trust_add_uid(&t, "0"), 0); /* the same uid, kept once */
    CHECK_INT_EQ(t.nuids, 1);
    CHECK_INT_EQ(access_trust_add_uid(&t, "no-such-user-of-heapprofd"), -EINVAL);
    CHECK_INT_EQ(access_trust_add_group(&t, "no-such-group-of-heapprofd"), -EINVAL);
    CHECK_INT_EQ(access_trust_add_uid(&t, "4294967295"), -EINVAL); /* (uid_t)-1 */
    CHECK_INT_EQ(access_trust_add_group(&t, "root"), 0);
    CHECK_INT_EQ(t.ngids, 1);
    CHECK_INT_EQ(t.gids[0], 0);
    for (unsigned i = 1; i < ACCESS_MAX_TRUSTED; i++) {
        char v[16];
        snprintf(v, sizeof(v), "%u", 100000 + i);
        CHECK_INT_EQ(access_trust_add_uid(&t, v), 0);
    }
    CHECK_INT_EQ(access_trust_add_uid(&t, "99"), -ENOSPC); /* full */

    struct passwd *nobody = getpwnam("nobody");
    CHECK(nobody != NULL);
    if (!nobody)
        return;
    struct caller c = {.via = ACCESS_VIA_TCP, .uid = nobody->pw_uid};
    access_resolve(&c, NULL);
    CHECK(c.has_uid && !c.trusted);
    CHECK(c.ngids >= 1 && c.gids[0] == nobody->pw_gid); /* its primary group, from the database */
    struct access_trust by_group = {.gids = {nobody->pw_gid}, .ngids = 1};
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

static void the_audit_line_is_one_line_of_fields(void)
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
    CHECK_STR_EQ(text ? text : "",
                 "heapprofd: audit: attach pid=42 comm=\"a\\\"b\\x0ac d\" sampler=uprobe "
                 "uid=1001 via=tcp listener=\"127.0.0.1:6060\" trusted=no\n"
                 "heapprofd: audit: attach pid=43 comm=\"x\" sampler=inprocess uid=- "
                 "via=token listener=\"0.0.0.0:6060\" trusted=yes\n");
    free(text);
}

int main(void)
{
    RUN_TEST(loopback_addresses_are_told_from_others);
    RUN_TEST(only_the_exact_bearer_token_matches);
    RUN_TEST(a_token_file_is_one_private_line_of_16_to_256_characters);
    RUN_TEST(a_unix_socket_peer_is_known_by_its_credentials);
    RUN_TEST(a_user_may_profile_only_processes_wholly_theirs);
    RUN_TEST(the_ownership_rule_on_given_ids);
    RUN_TEST(trust_by_uid_and_by_group);
    RUN_TEST(the_audit_line_is_one_line_of_fields);
    return check_exit_code();
}
