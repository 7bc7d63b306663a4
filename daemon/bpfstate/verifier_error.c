/*
 * verifier_error.c - captures the verifier's verdict from libbpf's log and
 * words a load failure after its real cause (see verifier_error.h).
 */
#include "verifier_error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/capability.h>

#include <bpf/libbpf.h>

/* Capability numbers newer than Debian 12's UAPI header may have. */
#define HP_CAP_SYS_ADMIN 21
#define HP_CAP_PERFMON 38
#define HP_CAP_BPF 39

/* The capture of the current load: see verifier_error.h for why static. */
static struct verifier_verdict captured;

/* Copies the verifier's last meaningful line of `log` (its statistics,
 * "processed N insns ..." and "verification time ...", are skipped). */
static void last_line(const char *log, char *out, size_t len)
{
    const char *end = log + strlen(log);
    while (end > log) {
        while (end > log && (end[-1] == '\n' || end[-1] == ' '))
            end--;
        const char *start = end;
        while (start > log && start[-1] != '\n')
            start--;
        size_t n = (size_t)(end - start);
        if (n && strncmp(start, "processed ", 10) != 0 &&
            strncmp(start, "verification time", 17) != 0 &&
            strncmp(start, "stack depth", 11) != 0) {
            snprintf(out, len, "%.*s", (int)(n < len ? n : len - 1), start);
            return;
        }
        end = start;
    }
    out[0] = '\0';
}

/* libbpf's hook: remembers the program and the last line of each verifier
 * log ("prog 'NAME': -- BEGIN PROG LOAD LOG --\n<log>-- END PROG LOAD LOG --"). */
static int capture(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    if (level != LIBBPF_WARN)
        return 0;
    va_list copy;
    va_copy(copy, ap);
    if (getenv("HEAPPROFD_DEBUG_BPF"))
        vfprintf(stderr, fmt, copy);
    va_end(copy);
    char *msg = NULL;
    if (vasprintf(&msg, fmt, ap) < 0)
        return 0;
    const char *begin = strstr(msg, "-- BEGIN PROG LOAD LOG --\n");
    const char *name = strstr(msg, "prog '");
    if (begin && name && name < begin) {
        name += 6;
        const char *q = strchr(name, '\'');
        size_t n = q ? (size_t)(q - name) : 0;
        snprintf(captured.prog, sizeof(captured.prog), "%.*s",
                 (int)(n < sizeof(captured.prog) ? n : sizeof(captured.prog) - 1), name);
        char *log = (char *)begin + strlen("-- BEGIN PROG LOAD LOG --\n");
        char *stop = strstr(log, "-- END PROG LOAD LOG --");
        if (stop)
            *stop = '\0';
        last_line(log, captured.line, sizeof(captured.line));
    }
    free(msg);
    return 0;
}

/* libbpf's hook outside loads: its warnings on stderr with
 * HEAPPROFD_DEBUG_BPF, else nothing; keeps no state. */
static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    if (level == LIBBPF_WARN && getenv("HEAPPROFD_DEBUG_BPF"))
        return vfprintf(stderr, fmt, ap);
    return 0;
}

void verifier_quiet_libbpf(void)
{
    libbpf_set_print(quiet);
}

void verifier_capture_begin(void)
{
    memset(&captured, 0, sizeof(captured));
    libbpf_set_print(capture);
}

void verifier_capture_end(struct verifier_verdict *v)
{
    *v = captured;
    libbpf_set_print(quiet);
}

/* The effective capability set, or all ones when it cannot be read (so
 * that nothing is blamed on capabilities that may be there). */
static uint64_t effective_caps(void)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof(d));
    if (syscall(SYS_capget, &h, d) != 0)
        return ~0ULL;
    return (uint64_t)d[0].effective | ((uint64_t)d[1].effective << 32);
}

bool verifier_caps_allow_bpf(void)
{
    uint64_t eff = effective_caps();
    if (eff & (1ULL << HP_CAP_SYS_ADMIN))
        return true;
    return (eff & (1ULL << HP_CAP_BPF)) && (eff & (1ULL << HP_CAP_PERFMON));
}

bool verifier_caps_have_sys_admin(void)
{
    return (effective_caps() & (1ULL << HP_CAP_SYS_ADMIN)) != 0;
}

void verifier_explain(int e, const struct verifier_verdict *v, const char *release, char *out,
                      size_t len)
{
    if (v->prog[0]) {
        snprintf(out, len, "the verifier of Linux %s refused program %s: %s", release, v->prog,
                 v->line[0] ? v->line : "(no log)");
    } else if ((e == -EPERM || e == -EACCES) && !verifier_caps_allow_bpf()) {
        snprintf(out, len, "%s: needs root with CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN), "
                 "which this process lacks", strerror(-e));
    } else if (access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
        snprintf(out, len, "%s: Linux %s has no BTF (/sys/kernel/btf/vmlinux; "
                 "CONFIG_DEBUG_INFO_BTF)", strerror(-e), release);
    } else {
        snprintf(out, len, "%s", strerror(-e));
    }
}
