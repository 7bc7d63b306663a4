/*
 * verifier_error.h - says why the kernel refused to load a BPF object, in
 * one line: a verifier rejection as one (the program, the kernel release,
 * the verifier's last line), missing privileges only when the effective
 * capabilities lack them, a kernel without BTF as such. Before this, every
 * refusal read "needs root with CAP_BPF", which sent a root user on a
 * kernel whose verifier refused a program to look at capabilities.
 */
#ifndef HEAPPROF_VERIFIER_ERROR_H
#define HEAPPROF_VERIFIER_ERROR_H

#include <stdbool.h>
#include <stddef.h>

/* The verifier's verdict on the last program libbpf failed to load. */
struct verifier_verdict {
    char prog[64];  /* the program's name; "" if no verifier log was seen */
    char line[192]; /* the verifier's last line before its statistics */
};

/*
 * Routes libbpf's messages through the capture for one load. libbpf's
 * print hook is one per process and takes no context, so the capture is a
 * single static record: loads run on the main thread only, before any
 * request thread starts (and on SIGHUP, which serves no request). With
 * HEAPPROFD_DEBUG_BPF set, libbpf's warnings still go to stderr.
 */
void verifier_capture_begin(void);

/* Sends libbpf's warnings to stderr with HEAPPROFD_DEBUG_BPF, else
 * nowhere (their causes are reported through verifier_explain). */
void verifier_quiet_libbpf(void);

/* Ends the capture (libbpf's warnings then go to stderr with
 * HEAPPROFD_DEBUG_BPF, else nowhere); fills `v` with the last rejection
 * seen since verifier_capture_begin() (v->prog "" if none). */
void verifier_capture_end(struct verifier_verdict *v);

/* Whether the effective capabilities allow loading and attaching tracing
 * programs (CAP_SYS_ADMIN, or CAP_BPF with CAP_PERFMON). */
bool verifier_caps_allow_bpf(void);

/* Whether the effective capabilities hold CAP_SYS_ADMIN, which perf-event
 * uprobes (the classic layout) need. */
bool verifier_caps_have_sys_admin(void);

/*
 * Writes into `out` why loading failed with -errno `e`: the verifier's
 * verdict in `v` (if it has one) on kernel `release`, else missing
 * capabilities (only if the effective set lacks them), a kernel without
 * BTF, or the errno itself.
 */
void verifier_explain(int e, const struct verifier_verdict *v, const char *release, char *out,
                      size_t len);

#endif
