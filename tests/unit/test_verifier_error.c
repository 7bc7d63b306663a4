/*
 * test_verifier_error.c - a load the verifier refuses is named as one: a
 * program of the real object is loaded as a socket filter, whose type may
 * not call the tracing helpers it calls, so the verifier refuses it; the
 * message must name that program, the kernel and the verifier's last line
 * (not its statistics), and never blame capabilities (this runs as root). Before, every refusal read
 * "needs root with CAP_BPF and CAP_PERFMON".
 */
#include "check.h"
#include "verifier_error.h"

#include <errno.h>
#include <string.h>
#include <sys/utsname.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "heapprof.skel.h"

/* Loads hp_entry alone, as a program type that may not call its helpers. */
static int load_refused_object(struct verifier_verdict *v)
{
    struct heapprof *skel = heapprof__open();
    CHECK(skel != NULL);
    if (!skel)
        return -ENOENT;
    struct bpf_program *p;
    bpf_object__for_each_program(p, skel->obj)
        bpf_program__set_autoload(p, p == skel->progs.hp_entry);
    CHECK_INT_EQ(bpf_program__set_type(skel->progs.hp_entry, BPF_PROG_TYPE_SOCKET_FILTER), 0);
    verifier_capture_begin();
    int e = heapprof__load(skel);
    verifier_capture_end(v);
    heapprof__destroy(skel);
    return e;
}

static void a_verifier_rejection_names_the_program_kernel_and_line(void)
{
    struct verifier_verdict v;
    int e = load_refused_object(&v);
    CHECK(e < 0);
    CHECK_STR_EQ(v.prog, "hp_entry");
    CHECK(v.line[0] != '\0');
    CHECK(strncmp(v.line, "processed ", 10) != 0);
    struct utsname u;
    uname(&u);
    char why[512], want[512];
    verifier_explain(e, &v, u.release, why, sizeof(why));
    snprintf(want, sizeof(want), "the verifier of Linux %s refused program hp_entry: %s",
             u.release, v.line);
    CHECK_STR_EQ(why, want);
    fprintf(stderr, "  %s\n", why);
}

static void capabilities_are_blamed_only_when_missing(void)
{
    CHECK(verifier_caps_allow_bpf()); /* root, as the unit tests run */
    struct verifier_verdict none = {{0}, {0}};
    char why[512];
    verifier_explain(-EPERM, &none, "6.1.0", why, sizeof(why));
    CHECK(strstr(why, "CAP_BPF") == NULL);
    CHECK_STR_EQ(why, strerror(EPERM));
}

int main(void)
{
    a_verifier_rejection_names_the_program_kernel_and_line();
    capabilities_are_blamed_only_when_missing();
    return check_exit_code();
}
