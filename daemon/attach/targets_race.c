/*
 * targets_race.c - an attach its process outran (see targets_race.h).
 *
 * Seen with pgbench -C, where every transaction forks a backend that
 * lives a few ms: "open /proc/N/mem: No such process" from processes in
 * the middle of their exit (their memory gone, not yet zombies, so their
 * start time still reads), and "no free address range" from python3
 * children in the middle of an exec, logged as fallbacks and counted as
 * attach errors, which docs/operations.md says to alert on.
 */
#include "targets_race.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proc_info.h"

/* Whether debug messages are wanted (HEAPPROFD_DEBUG set, to anything). */
static bool debug_log(void)
{
    static int on = -1;
    if (on < 0)
        on = getenv("HEAPPROFD_DEBUG") != NULL;
    return on;
}


/*
 * Whether the process of `tg`, whose attach just failed, outran it: it
 * exited or is exiting (its memory is gone before it is a zombie, which
 * is when /proc/PID/mem fails with ESRCH), or it exec'd another program
 * (the executable it had as the attach started is not its own any more).
 * Either is no failure of ours.
 */
enum attach_race attach_race(const struct target *tg)
{
    uint64_t start_time;
    dev_t dev;
    ino_t ino;
    if (proc_start_time(tg->pid, &start_time) != 0 || start_time != tg->start_time ||
        proc_is_exiting(tg->pid))
        return RACE_EXITED;
    if (tg->exe_ino && proc_exe_identity(tg->pid, &dev, &ino) == 0 &&
        (dev != tg->exe_dev || ino != tg->exe_ino))
        return RACE_EXEC;
    return RACE_NONE;
}

void attach_race_log(pid_t pid, enum attach_race race, const char *err)
{
    if (race != RACE_NONE && debug_log())
        fprintf(stderr, "heapprofd: debug: pid %d %s during its attach: %s\n", (int)pid,
                race == RACE_EXITED ? "exited" : "exec'd", err);
}
