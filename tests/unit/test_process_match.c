/*
 * test_process_match.c - selectors (process_match.c): a unit found by a
 * component of the cgroup path wherever its slice is, every field given
 * must match and the reason names the one that did not, facts of a pid
 * read twice agree or say the pid changed hands, and the search of /proc
 * finds a child by name but never the test itself nor a kernel thread.
 * (The comm, exe and cgroup comparisons on real processes are in
 * test_target_rules.c, which goes through the same functions.)
 */
#include "check.h"
#include "process_match.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* How long a child may take to show its name in /proc. */
#define CHILD_TIMEOUT_S 5

static void a_unit_is_a_component_of_the_cgroup_path_wherever_its_slice_is(void)
{
    char cg[256];
    CHECK(match_unit("/system.slice/redis.service", "redis.service", cg, sizeof(cg)));
    CHECK_STR_EQ(cg, "/system.slice/redis.service");
    CHECK(match_unit("/system.slice/redis.service/worker", "redis.service", cg, sizeof(cg)));
    CHECK_STR_EQ(cg, "/system.slice/redis.service");
    CHECK(match_unit("/db.slice/redis.service", "redis.service", NULL, 0));
    CHECK(match_unit("/user.slice/user-1000.slice/user@1000.service/app.slice/redis.service",
                     "redis.service", cg, sizeof(cg)));
    CHECK_STR_EQ(cg, "/user.slice/user-1000.slice/user@1000.service/app.slice/redis.service");
    CHECK(match_unit("/user.slice/user-1000.slice/user@1000.service/app.slice/redis.service",
                     "user@1000.service", cg, sizeof(cg)));
    CHECK_STR_EQ(cg, "/user.slice/user-1000.slice/user@1000.service");
    CHECK(!match_unit("/system.slice/redis.service", "redis", NULL, 0));
    CHECK(!match_unit("/system.slice/redis.service2", "redis.service", NULL, 0));
    CHECK(!match_unit("/system.slice/myredis.service", "redis.service", NULL, 0));
    CHECK(!match_unit("/", "redis.service", NULL, 0));
    CHECK(!match_unit("", "redis.service", NULL, 0));
    CHECK(!match_unit("/system.slice/redis.service", "", NULL, 0));
}

static void an_exe_read_by_another_tool_may_say_deleted(void)
{
    CHECK(match_exe("/usr/bin/redis-server", "/usr/bin/redis-server"));
    CHECK(match_exe("/usr/bin/redis-server", "/usr/bin/redis-server (deleted)"));
    CHECK(!match_exe("/usr/bin/redis-server", "/usr/bin/redis"));
    CHECK(!match_exe("/usr/bin/redis", "/usr/bin/redis-server"));
    CHECK(!match_exe("/usr/bin/redis-server", " (deleted)"));
}

static void a_cgroup_holds_those_below_it_and_the_root_holds_all(void)
{
    CHECK(match_cgroup("/system.slice/redis.service", "/system.slice"));
    CHECK(match_cgroup("/system.slice/redis.service", "/system.slice/"));
    CHECK(match_cgroup("/system.slice", "/system.slice"));
    CHECK(!match_cgroup("/system.slicer", "/system.slice"));
    CHECK(match_cgroup("/anything", "/"));
}

/* Facts as a process could have them. */
static struct process_facts facts_of(const char *comm, const char *exe, const char *cgroup)
{
    struct process_facts f = {.start_time = 42};
    snprintf(f.comm, sizeof(f.comm), "%s", comm);
    f.exe = strdup(exe);
    f.cgroup = strdup(cgroup);
    return f;
}

static void every_field_given_must_match_and_the_reason_names_the_first_that_does_not(void)
{
    struct process_facts f =
        facts_of("redis-server", "/usr/bin/redis-server", "/system.slice/redis-server.service");
    char why[256] = "";
    struct process_selector all = {.comm = "redis-server", .exe = "/usr/bin/redis-server",
                                   .cgroup = "/system.slice", .unit = "redis-server.service"};
    CHECK(process_selector_matches(&all, &f, why, sizeof(why)));
    struct process_selector none = {0};
    CHECK(!process_selector_any(&none));
    CHECK(process_selector_matches(&none, &f, why, sizeof(why))); /* no field: any process */

    struct process_selector exe = all;
    exe.exe = "/usr/bin/python3";
    CHECK(!process_selector_matches(&exe, &f, why, sizeof(why)));
    CHECK_STR_EQ(why, "its exe is /usr/bin/redis-server, not /usr/bin/python3");
    struct process_selector unit = all;
    unit.unit = "postgresql.service";
    CHECK(!process_selector_matches(&unit, &f, why, sizeof(why)));
    CHECK_STR_EQ(why, "its cgroup /system.slice/redis-server.service is not in unit "
                      "postgresql.service");
    struct process_selector comm = {.comm = "redis"};
    CHECK(!process_selector_matches(&comm, &f, why, sizeof(why)));
    CHECK_STR_EQ(why, "its comm is redis-server, not redis");
    struct process_selector cgroup = {.cgroup = "/user.slice"};
    CHECK(!process_selector_matches(&cgroup, &f, NULL, 0));

    char text[256];
    int n = process_selector_describe(&all, text, sizeof(text));
    CHECK_STR_EQ(text, "comm=redis-server&exe=/usr/bin/redis-server&cgroup=/system.slice&"
                       "unit=redis-server.service");
    CHECK_INT_EQ(n, (int)strlen(text));
    n = process_selector_describe(&all, text, 10); /* cut, and says how long it would be */
    CHECK_STR_EQ(text, "comm=redi");
    CHECK_INT_EQ(n, (int)strlen("comm=redis-server&exe=/usr/bin/redis-server&cgroup=/system.slice"
                                "&unit=redis-server.service"));
    process_facts_free(&f);
}

static void facts_of_a_kernel_thread_have_no_exe_and_a_copy_owns_its_strings(void)
{
    struct process_facts kthreadd, copy;
    /* pid 2 is kthreadd where this test runs in the host's pid namespace. */
    if (process_facts_read(2, &kthreadd) == 0 && strcmp(kthreadd.comm, "kthreadd") == 0) {
        CHECK_STR_EQ(kthreadd.exe, "");
        process_facts_free(&kthreadd);
    }
    struct process_facts self;
    CHECK_INT_EQ(process_facts_read(getpid(), &self), 0);
    CHECK(self.start_time > 0);
    CHECK(self.exe[0] == '/');
    CHECK_INT_EQ(process_facts_copy(&copy, &self), 0);
    CHECK(copy.exe != self.exe);
    CHECK_STR_EQ(copy.exe, self.exe);
    CHECK_STR_EQ(copy.cgroup, self.cgroup);
    process_facts_free(&self);
    CHECK(self.exe == NULL);
    CHECK(copy.exe[0] == '/'); /* still there */
    process_facts_free(&copy);
}

/* Polls until `pid` is named `name`; 0, or -1 after CHILD_TIMEOUT_S. */
static int wait_named(pid_t pid, const char *name)
{
    struct timespec nap = {0, 10 * 1000 * 1000};
    for (int i = 0; i < CHILD_TIMEOUT_S * 100; i++) {
        struct process_facts f;
        if (process_facts_read(pid, &f) == 0) {
            int same = strcmp(f.comm, name) == 0;
            process_facts_free(&f);
            if (same)
                return 0;
        }
        nanosleep(&nap, NULL);
    }
    fprintf(stderr, "child %d not named %s within %d s\n", (int)pid, name, CHILD_TIMEOUT_S);
    check_failures++;
    return -1;
}

static void the_search_finds_a_child_by_name_but_never_itself_and_a_gone_pid_has_no_facts(void)
{
    char name[16], own[17] = "";
    snprintf(name, sizeof(name), "hpm%05d", (int)(getpid() % 100000));
    prctl(PR_GET_NAME, own);
    prctl(PR_SET_NAME, name); /* it matches its own selector, yet the search skips it */
    pid_t pid = fork();
    if (pid == 0) {
        pause();
        _exit(0);
    }
    CHECK(pid > 0);
    if (pid > 0 && wait_named(pid, name) == 0) {
        struct process_selector s = {.comm = name};
        struct process_found found[4];
        CHECK_INT_EQ(process_selector_find(&s, found, 4), 1);
        CHECK_INT_EQ(found[0].pid, pid);
        CHECK_STR_EQ(found[0].comm, name);
        CHECK_INT_EQ(process_selector_find(&s, found, 0), 1); /* counted, not written */
    }
    prctl(PR_SET_NAME, own);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    struct process_facts gone;
    CHECK_INT_EQ(process_facts_read(pid, &gone), -ESRCH);
}

int main(void)
{
    RUN_TEST(a_unit_is_a_component_of_the_cgroup_path_wherever_its_slice_is);
    RUN_TEST(an_exe_read_by_another_tool_may_say_deleted);
    RUN_TEST(a_cgroup_holds_those_below_it_and_the_root_holds_all);
    RUN_TEST(every_field_given_must_match_and_the_reason_names_the_first_that_does_not);
    RUN_TEST(facts_of_a_kernel_thread_have_no_exe_and_a_copy_owns_its_strings);
    RUN_TEST(the_search_finds_a_child_by_name_but_never_itself_and_a_gone_pid_has_no_facts);
    return check_exit_code();
}
