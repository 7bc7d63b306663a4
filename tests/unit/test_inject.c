/*
 * test_inject.c - the pure parts of daemon/inject/: the registers a thread
 * resumes with after a stop (the kernel's restart of an interrupted system
 * call, which the stub and the release must do as the kernel would), the
 * calls a stop would break, and the embedded sampler object (its symbols,
 * its build ID, no dynamic relocation).
 */
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>

#include "check.h"
#include "hp_sampler.h"
#include "remote_stub.h"
#include "sampler_image.h"
#include "thread_stop.h"

/* A thread stopped inside read(2), which the kernel restarts: it resumes
 * at the syscall again, with the call's number in rax. */
static void an_interrupted_restartable_call_runs_again(void)
{
    struct user_regs_struct r, out;
    memset(&r, 0, sizeof(r));
    r.orig_rax = SYS_read;
    r.rax = (unsigned long long)-512; /* -ERESTARTSYS */
    r.rip = 0x1002;
    remote_stub_resume_regs(&r, &out);
    CHECK_U64_EQ(out.rip, 0x1000);
    CHECK_U64_EQ(out.rax, SYS_read);
    CHECK_U64_EQ(out.orig_rax, (unsigned long long)-1);
}

/* nanosleep's restart goes through restart_syscall. */
static void a_restart_block_call_runs_restart_syscall(void)
{
    struct user_regs_struct r, out;
    memset(&r, 0, sizeof(r));
    r.orig_rax = SYS_nanosleep;
    r.rax = (unsigned long long)-516; /* -ERESTART_RESTARTBLOCK */
    r.rip = 0x2002;
    remote_stub_resume_regs(&r, &out);
    CHECK_U64_EQ(out.rip, 0x2000);
    CHECK_U64_EQ(out.rax, SYS_restart_syscall);
}

/* A thread stopped in user code, or a call that returned EINTR, resumes as
 * it was. */
static void a_thread_outside_a_restart_resumes_as_it_was(void)
{
    struct user_regs_struct r, out;
    memset(&r, 0, sizeof(r));
    r.orig_rax = (unsigned long long)-1;
    r.rax = (unsigned long long)-512;
    r.rip = 0x3000;
    remote_stub_resume_regs(&r, &out);
    CHECK(memcmp(&r, &out, sizeof(r)) == 0);
    r.orig_rax = SYS_read;
    r.rax = (unsigned long long)-EINTR;
    remote_stub_resume_regs(&r, &out);
    CHECK(memcmp(&r, &out, sizeof(r)) == 0);
}

/* The calls signal(7) says fail with EINTR after a stop are never chosen;
 * the ones the kernel restarts are. */
static void calls_a_stop_would_break_are_avoided(void)
{
    CHECK(!thread_stop_syscall_safe(SYS_epoll_wait));
    CHECK(!thread_stop_syscall_safe(SYS_epoll_pwait));
    CHECK(!thread_stop_syscall_safe(SYS_semtimedop));
    CHECK(!thread_stop_syscall_safe(SYS_rt_sigtimedwait));
    CHECK(!thread_stop_syscall_safe(SYS_recvfrom));
    CHECK(thread_stop_syscall_safe(SYS_read));
    CHECK(thread_stop_syscall_safe(SYS_futex));
    CHECK(thread_stop_syscall_safe(SYS_poll));
    CHECK(thread_stop_syscall_safe(SYS_nanosleep));
}

/* The stub is built whole, and its data does not overrun it. */
static void the_stub_fits(void)
{
    struct user_regs_struct r;
    memset(&r, 0, sizeof(r));
    uint8_t code[REMOTE_STUB_SIZE + 16];
    memset(code, 0xee, sizeof(code));
    remote_stub_build(0x10000, &r, ~0ULL, code);
    CHECK(code[0] == 0x0f && code[1] == 0x05); /* it starts with syscall */
    for (size_t i = REMOTE_STUB_SIZE; i < sizeof(code); i++)
        CHECK(code[i] == 0xee);
}

/* The embedded sampler has what inject.c looks up, and a build ID. */
static void the_sampler_object_has_its_symbols_and_build_id(void)
{
    char err[256];
    const struct sampler_image *img = sampler_image_get(err, sizeof(err));
    CHECK(img != NULL);
    if (!img)
        return;
    const char *names[] = {HP_SAMPLER_CONFIG_SYM, HP_INSTALL_STATUS_SYM, HP_REPORT_ALLOC_SYM,
                           HP_REPORT_FREE_SYM, HP_REMOTE_CALL_SYM, "hp_wrap_malloc",
                           "hp_wrap_free", "hp_wrap_dlopen", "hp_wrap_dlmopen"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        CHECK(sampler_image_symbol(img, names[i]) != 0);
    CHECK(img->build_id_len >= 16);
    CHECK(memcmp(img->elf + img->build_id_vaddr, img->build_id, img->build_id_len) == 0);
}

int main(void)
{
    RUN_TEST(an_interrupted_restartable_call_runs_again);
    RUN_TEST(a_restart_block_call_runs_restart_syscall);
    RUN_TEST(a_thread_outside_a_restart_resumes_as_it_was);
    RUN_TEST(calls_a_stop_would_break_are_avoided);
    RUN_TEST(the_stub_fits);
    RUN_TEST(the_sampler_object_has_its_symbols_and_build_id);
    return check_exit_code();
}
