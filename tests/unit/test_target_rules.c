/*
 * test_target_rules.c - which processes the comm, exe and cgroup rules
 * match (target_rules.c), on real processes this test starts: a name the
 * kernel cut to 15 bytes, a program deleted after it started, a process in a
 * cgroup v2 directory made for the test (the test needs root for that, as
 * the daemon does), the scan of /proc that skips the daemon itself, and the
 * owner a rule names or charges.
 */
#include "check.h"
#include "target_rules.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* How long a child may take to show its name, program or cgroup in /proc. */
#define CHILD_TIMEOUT_S 5

/* A rule set with one rule of one kind ("comm", "exe" or "cgroup"). */
static struct target_rule_set one_rule(const char *kind, const char *value)
{
    struct target_rule_set r = {0};
    char **slot = strcmp(kind, "comm") == 0  ? &r.comms[r.ncomms++]
                  : strcmp(kind, "exe") == 0 ? &r.exes[r.nexes++]
                                             : &r.cgroups[r.ncgroups++];
    *slot = strdup(value);
    return r;
}

/* Fails unless a `kind` rule `value` matches pid (or does not, per `want`). */
static void check_rule(pid_t pid, const char *kind, const char *value, int want, const char *why)
{
    struct target_rule_set r = one_rule(kind, value);
    int got = target_rules_match(&r, pid);
    if (got != want) {
        fprintf(stderr, "%s:%d: %s rule \"%s\" on pid %d: expected %s, got %s (%s)\n", __FILE__,
                __LINE__, kind, value, (int)pid, want ? "a match" : "none",
                got ? "a match" : "none", why);
        check_failures++;
    }
    target_rules_free(&r);
}

/* The first line of /proc/PID/`file` (or of its 0:: line for "cgroup"), or "". */
static void proc_text(pid_t pid, const char *file, char *out, size_t len)
{
    char path[64], line[PATH_MAX];
    out[0] = '\0';
    snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
    if (strcmp(file, "exe") == 0) {
        ssize_t n = readlink(path, out, len - 1);
        out[n > 0 ? n : 0] = '\0';
        return;
    }
    FILE *f = fopen(path, "re");
    while (f && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        if (strcmp(file, "cgroup") != 0 || strncmp(line, "0::", 3) == 0) {
            snprintf(out, len, "%s", strcmp(file, "cgroup") == 0 ? line + 3 : line);
            break;
        }
    }
    if (f)
        fclose(f);
}

/* Polls /proc/PID/`file` until it reads `want`; fails after CHILD_TIMEOUT_S. */
static int wait_proc_text(pid_t pid, const char *file, const char *want)
{
    char got[PATH_MAX];
    struct timespec tick = {0, 10 * 1000 * 1000};
    for (int i = 0; i < CHILD_TIMEOUT_S * 100; i++) {
        proc_text(pid, file, got, sizeof(got));
        if (strcmp(got, want) == 0)
            return 0;
        nanosleep(&tick, NULL);
    }
    fprintf(stderr, "%s:%d: /proc/%d/%s is \"%s\", not \"%s\", after %d s\n", __FILE__, __LINE__,
            (int)pid, file, got, want, CHILD_TIMEOUT_S);
    check_failures++;
    return -1;
}

/* A child that names itself `name` (as the kernel keeps it) and waits to be killed. */
static pid_t child_named(const char *name)
{
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_NAME, name);
        pause();
        _exit(0);
    }
    CHECK(pid > 0);
    return pid;
}

static void stop_child(pid_t pid)
{
    if (pid <= 0)
        return;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static void a_comm_rule_matches_the_15_bytes_the_kernel_keeps(void)
{
    char name[32], kept[16], rule[40];
    snprintf(name, sizeof(name), "hpu%05d-abcdefghij", (int)(getpid() % 100000)); /* 19 bytes */
    snprintf(kept, sizeof(kept), "%.15s", name);
    pid_t pid = child_named(name);
    if (pid > 0 && wait_proc_text(pid, "comm", kept) == 0) {
        check_rule(pid, "comm", name, 1, "the name as the program set it");
        check_rule(pid, "comm", kept, 1, "the 15 bytes the kernel kept");
        snprintf(rule, sizeof(rule), "%.16s", name);
        check_rule(pid, "comm", rule, 1, "16 bytes of the name");
        snprintf(rule, sizeof(rule), "%.14s", name);
        check_rule(pid, "comm", rule, 0, "a prefix shorter than what the kernel kept");
        snprintf(rule, sizeof(rule), "%.15sXYZ", name);
        check_rule(pid, "comm", rule, 1, "past 15 bytes the kernel cannot tell names apart");
        snprintf(rule, sizeof(rule), "%.14sX-abcdefghij", name);
        check_rule(pid, "comm", rule, 0, "differs within the first 15 bytes");
    }
    stop_child(pid);
}

static void a_short_comm_rule_matches_that_name_only(void)
{
    char name[16], rule[24];
    snprintf(name, sizeof(name), "hps%05d", (int)(getpid() % 100000));
    pid_t pid = child_named(name);
    if (pid > 0 && wait_proc_text(pid, "comm", name) == 0) {
        check_rule(pid, "comm", name, 1, "the same name");
        snprintf(rule, sizeof(rule), "%.7s", name);
        check_rule(pid, "comm", rule, 0, "a prefix of the name");
        snprintf(rule, sizeof(rule), "%sx", name);
        check_rule(pid, "comm", rule, 0, "the name and more, under 15 bytes");
    }
    stop_child(pid);
}

/* Copies `from` to `to` with mode 0755; 0 or -1. */
static int copy_file(const char *from, const char *to)
{
    char buf[65536];
    int in = open(from, O_RDONLY | O_CLOEXEC);
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    ssize_t n = 0;
    while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
        if (write(out, buf, (size_t)n) != n)
            n = -1;
    if (in >= 0)
        close(in);
    if (out >= 0)
        close(out);
    return in >= 0 && out >= 0 && n == 0 ? 0 : -1;
}

static void an_exe_rule_still_matches_a_program_deleted_after_it_started(void)
{
    char dir[] = "/tmp/heapprof_rules_XXXXXX", prog[64], link[64], rule[80];
    CHECK(mkdtemp(dir) != NULL);
    /* A space in the name, as " (deleted)" has one. */
    snprintf(prog, sizeof(prog), "%s/my prog", dir);
    snprintf(link, sizeof(link), "%s/link", dir);
    CHECK_INT_EQ(copy_file("/bin/sleep", prog), 0);
    CHECK_INT_EQ(symlink(prog, link), 0);
    pid_t pid = fork();
    if (pid == 0) {
        execl(link, "sleep", "60", (char *)NULL);
        _exit(127);
    }
    CHECK(pid > 0);
    if (pid > 0 && wait_proc_text(pid, "exe", prog) == 0) {
        check_rule(pid, "exe", prog, 1, "the program's path");
        check_rule(pid, "exe", link, 0, "a symlink to it: /proc/PID/exe names the file");
        check_rule(pid, "exe", "/bin/sleep", 0, "another copy of the program");
        CHECK_INT_EQ(unlink(prog), 0);
        snprintf(rule, sizeof(rule), "%s (deleted)", prog);
        if (wait_proc_text(pid, "exe", rule) == 0) {
            check_rule(pid, "exe", prog, 1, "the program, deleted since it started");
            check_rule(pid, "exe", rule, 0, "\" (deleted)\" is the kernel's note, not the path");
        }
    }
    stop_child(pid);
    unlink(prog);
    unlink(link);
    rmdir(dir);
}

/* Where a cgroup v2 hierarchy is mounted (its mount point and the cgroup
 * path of its root), from /proc/self/mountinfo; 0 or -1. */
static int find_cgroup2(char *point, size_t plen, char *root, size_t rlen)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    char line[4096];
    int found = -1;
    while (f && found != 0 && fgets(line, sizeof(line), f)) {
        char r[PATH_MAX], p[PATH_MAX];
        const char *dash = strstr(line, " - ");
        if (dash && strncmp(dash + 3, "cgroup2 ", 8) == 0 &&
            sscanf(line, "%*s %*s %*s %4095s %4095s", r, p) == 2) {
            snprintf(point, plen, "%s", p);
            snprintf(root, rlen, "%s", r);
            found = 0;
        }
    }
    if (f)
        fclose(f);
    return found;
}

/* Writes `text` to `path`; 0 or -errno. */
static int write_text(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int e = write(fd, text, strlen(text)) == (ssize_t)strlen(text) ? 0 : -errno;
    close(fd);
    return e;
}

/* Checks the cgroup rules against `pid`, which is in cgroup `path` (/A/B). */
static void check_cgroup_rules(pid_t pid, const char *path)
{
    char rule[PATH_MAX * 2 + 16], parent[PATH_MAX * 2];
    snprintf(parent, sizeof(parent), "%.*s", (int)(strrchr(path, '/') - path), path);
    check_rule(pid, "cgroup", path, 1, "its own cgroup");
    check_rule(pid, "cgroup", parent, 1, "the cgroup above its own");
    check_rule(pid, "cgroup", "/", 1, "the root, which holds every process");
    snprintf(rule, sizeof(rule), "%s/", path);
    check_rule(pid, "cgroup", rule, 1, "its own, with a trailing slash");
    snprintf(rule, sizeof(rule), "%s//", parent);
    check_rule(pid, "cgroup", rule, 1, "the one above, with trailing slashes");
    snprintf(rule, sizeof(rule), "%.*s", (int)strlen(path) - 1, path);
    check_rule(pid, "cgroup", rule, 0, "a prefix that ends inside a name");
    snprintf(rule, sizeof(rule), "%sx", path);
    check_rule(pid, "cgroup", rule, 0, "a longer name beside it");
    snprintf(rule, sizeof(rule), "%s/below", path);
    check_rule(pid, "cgroup", rule, 0, "a cgroup below its own");
}

static void a_cgroup_rule_matches_its_cgroup_and_those_below_it(void)
{
    char point[PATH_MAX], root[PATH_MAX], mounted[] = "/tmp/heapprof_cg_XXXXXX";
    int made_mount = 0;
    if (find_cgroup2(point, sizeof(point), root, sizeof(root)) != 0) {
        /* None mounted (a cgroup v1 host): mount one, as the daemon's users would. */
        CHECK(mkdtemp(mounted) != NULL);
        CHECK_INT_EQ(mount("none", mounted, "cgroup2", 0, NULL), 0);
        snprintf(point, sizeof(point), "%s", mounted);
        snprintf(root, sizeof(root), "/");
        made_mount = 1;
    }
    char top[PATH_MAX + 64], leaf[PATH_MAX + 80], procs[PATH_MAX + 96], want[PATH_MAX * 2];
    snprintf(top, sizeof(top), "%s/heapprof-unit-%d", point, (int)getpid());
    snprintf(leaf, sizeof(leaf), "%s/leaf", top);
    snprintf(procs, sizeof(procs), "%s/cgroup.procs", leaf);
    snprintf(want, sizeof(want), "%s/heapprof-unit-%d/leaf", strcmp(root, "/") ? root : "",
             (int)getpid());
    if (mkdir(top, 0755) != 0 || mkdir(leaf, 0755) != 0) {
        fprintf(stderr, "%s:%d: mkdir %s: %s (this test needs root and cgroup v2)\n", __FILE__,
                __LINE__, leaf, strerror(errno));
        check_failures++;
    }
    pid_t pid = child_named("hpu-cgroup");
    char text[32];
    snprintf(text, sizeof(text), "%d\n", (int)pid);
    int e = pid > 0 ? write_text(procs, text) : -ECHILD;
    if (e != 0) {
        fprintf(stderr, "%s:%d: moving pid %d into %s: %s\n", __FILE__, __LINE__, (int)pid, leaf,
                strerror(-e));
        check_failures++;
    } else if (wait_proc_text(pid, "cgroup", want) == 0) {
        check_cgroup_rules(pid, want);
    }
    stop_child(pid);
    /* The kernel empties the cgroup once its process is reaped. */
    struct timespec tick = {0, 10 * 1000 * 1000};
    for (int i = 0; i < CHILD_TIMEOUT_S * 100 && rmdir(leaf) != 0 && errno == EBUSY; i++)
        nanosleep(&tick, NULL);
    CHECK_INT_EQ(access(leaf, F_OK) == 0 ? -1 : rmdir(top), 0);
    if (made_mount) {
        umount(mounted);
        rmdir(mounted);
    }
}

/* Collects the pids target_rules_scan() finds. */
struct found {
    pid_t pids[64];
    size_t n;
};

static void collect(pid_t pid, void *arg)
{
    struct found *f = arg;
    if (f->n < 64)
        f->pids[f->n++] = pid;
}

static void the_scan_finds_matching_processes_but_never_itself(void)
{
    char name[16], own[16];
    snprintf(name, sizeof(name), "hpn%05d", (int)(getpid() % 100000));
    proc_text(getpid(), "comm", own, sizeof(own));
    prctl(PR_SET_NAME, name); /* the scanner matches its own rule, yet skips itself */
    pid_t pid = child_named(name);
    if (pid > 0 && wait_proc_text(pid, "comm", name) == 0) {
        struct target_rule_set r = one_rule("comm", name);
        struct found f = {.n = 0};
        CHECK_INT_EQ(target_rules_scan(&r, collect, &f), 1);
        CHECK_INT_EQ(f.n, 1);
        CHECK_INT_EQ(f.n ? f.pids[0] : 0, pid);
        CHECK(target_rules_match(&r, getpid())); /* it does match */
        target_rules_free(&r);
        CHECK_INT_EQ(r.ncomms, 0);
    }
    prctl(PR_SET_NAME, own);
    stop_child(pid);
    /* No rules: nothing to scan for, nothing found. */
    struct target_rule_set none = {0};
    struct found f = {.n = 0};
    CHECK(!target_rules_any(&none));
    CHECK_INT_EQ(target_rules_scan(&none, collect, &f), 0);
    CHECK_INT_EQ(f.n, 0);
}

static void a_process_that_is_gone_matches_nothing(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    CHECK(pid > 0);
    waitpid(pid, NULL, 0);
    check_rule(pid, "comm", "test_target_rules", 0, "no such process");
    check_rule(pid, "exe", "/proc/self/exe", 0, "no such process");
    check_rule(pid, "cgroup", "/", 0, "no such process");
}

/* A child that became uid `uid` and waits to be killed; its pid. */
static pid_t child_of_uid(uid_t uid)
{
    int ready[2];
    CHECK(pipe(ready) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(ready[0]);
        if (setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0)
            _exit(1);
        (void)!write(ready[1], "x", 1);
        pause();
        _exit(0);
    }
    char c;
    close(ready[1]);
    CHECK_INT_EQ(read(ready[0], &c, 1), 1);
    close(ready[0]);
    return pid;
}

static void a_rule_without_an_owner_charges_the_process_to_its_own(void)
{
    pid_t user = child_of_uid(65534);
    struct target_rule_set r = one_rule("comm", "test_target_rul");
    int sampler;
    bool owned = false;
    uid_t owner = 0;
    CHECK_INT_EQ(target_rules_match_owner(&r, user, &sampler, &owned, &owner), 1);
    CHECK(owned);
    CHECK_INT_EQ(owner, 65534);
    /* Named: only that user's processes match, and none is charged. */
    r.comm_owners[0] = (struct rule_owner){.named = true, .uid = 0};
    CHECK_INT_EQ(target_rules_match_owner(&r, user, &sampler, &owned, &owner), 0);
    r.comm_owners[0].uid = 65534;
    owned = true;
    CHECK_INT_EQ(target_rules_match_owner(&r, user, &sampler, &owned, &owner), 1);
    CHECK(!owned);
    /* Root's process is never charged. */
    r.comm_owners[0].named = false;
    CHECK_INT_EQ(target_rules_match_owner(&r, getpid(), &sampler, &owned, &owner), 1);
    CHECK(!owned);
    target_rules_free(&r);
    kill(user, SIGKILL);
    waitpid(user, NULL, 0);
}

int main(void)
{
    RUN_TEST(a_comm_rule_matches_the_15_bytes_the_kernel_keeps);
    RUN_TEST(a_short_comm_rule_matches_that_name_only);
    RUN_TEST(an_exe_rule_still_matches_a_program_deleted_after_it_started);
    RUN_TEST(a_cgroup_rule_matches_its_cgroup_and_those_below_it);
    RUN_TEST(the_scan_finds_matching_processes_but_never_itself);
    RUN_TEST(a_process_that_is_gone_matches_nothing);
    RUN_TEST(a_rule_without_an_owner_charges_the_process_to_its_own);
    return check_exit_code();
}
