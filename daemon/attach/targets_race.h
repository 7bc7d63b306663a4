/*
 * targets_race.h - tells an attach that failed because its process
 * outran it (exited, or exec'd another program, while it ran) from a real
 * failure: targets.c counts the first kind apart
 * (heapprofd_attach_raced_total{reason}), logs it only at debug level,
 * and gives no fallback message for it.
 */
#ifndef HEAPPROF_TARGETS_RACE_H
#define HEAPPROF_TARGETS_RACE_H

#include <sys/types.h>

#include "target_slot.h"

/* Whether the process of `tg`, whose attach just failed, outran it; reads
 * /proc now. tg->exe_dev and exe_ino are the executable it had as the
 * attach started (0: none known). */
enum attach_race attach_race(const struct target *tg);

/* Logs a race at debug level (HEAPPROFD_DEBUG in the environment), once
 * for the attach that met it; nothing for RACE_NONE. */
void attach_race_log(pid_t pid, enum attach_race race, const char *err);

#endif
