/*
 * report.S - the sampler's report functions, the daemon's remote call into
 * it, and the wrappers of dlopen and dlmopen.
 *
 * hp_report_alloc(ptr, size, kind, ret, sp, pos) and hp_report_free(ptr,
 * reason) do nothing: the daemon's uprobes on them read their arguments.
 * Each is a one-byte nop (which the kernel emulates at the probe, no single
 * step) and a return.
 *
 * hp_report_alloc_opt is the same with a 5-byte nop, which Linux 6.18
 * "optimizes": the probe becomes a call to a [uprobes-trampoline] mapping,
 * one system call instead of a trap and its emulation. That mapping is not
 * inherited by fork(), while the call written into the probed page is, so
 * a forked child that reached it would die of SIGSEGV at the trampoline's
 * address: the wrappers call it only while the flag in hp_fork_page, a
 * page the installer marks MADV_WIPEONFORK, says so (sampler.c), which the
 * daemon sets in each process once it has checked it. The plain functions
 * are 2 bytes: they cannot hold that call.
 */

/* Offsets into struct hp_sampler_config of orig[HP_E_dlopen] and
 * orig[HP_E_dlmopen]; slots.c asserts them. */
#define ORIG_DLOPEN 1088
#define ORIG_DLMOPEN 1096
/* Offset of hp_install_status.done; slots.c asserts it. */
#define DONE_OFFSET 32
/* HP_REMOTE_DONE_SYSCALL: getpid. */
#define DONE_SYSCALL 39

    .text
    .globl hp_report_alloc
    .hidden hp_report_alloc
    .type hp_report_alloc, @function
    .p2align 4
hp_report_alloc:
    .cfi_startproc
    nop
    ret
    .cfi_endproc
    .size hp_report_alloc, .-hp_report_alloc

    .globl hp_report_alloc_opt
    .hidden hp_report_alloc_opt
    .type hp_report_alloc_opt, @function
    .p2align 4
hp_report_alloc_opt:
    .cfi_startproc
    .byte 0x0f, 0x1f, 0x44, 0x00, 0x00 /* nopl 0(%rax,%rax,1): the optimizable nop */
    ret
    .cfi_endproc
    .size hp_report_alloc_opt, .-hp_report_alloc_opt

    .globl hp_report_free
    .hidden hp_report_free
    .type hp_report_free, @function
    .p2align 4
hp_report_free:
    .cfi_startproc
    nop
    ret
    .cfi_endproc
    .size hp_report_free, .-hp_report_free

/*
 * hp_remote_call(op, cookie): what the daemon runs on one stopped thread.
 * It points the thread here with the return address of its system call
 * stub (daemon/inject/remote_stub.h) on the stack and lets it run: once
 * the operation is done and the thread's extended state is back, `cookie`
 * is written to hp_install_status.done (what the daemon watches for), and
 * the return goes to the stub, whose `syscall` runs getpid and which then
 * puts back the thread's signal mask and every general register, and
 * returns it to where it was. A daemon that dies meanwhile leaves the
 * thread to carry on. The thread was stopped anywhere, in code that may hold values
 * in vector registers, and the loader's code called here may use them:
 * the whole extended state is saved here (XSAVE, every enabled feature)
 * and restored before returning.
 */
    .globl hp_remote_call
    .hidden hp_remote_call
    .type hp_remote_call, @function
    .p2align 4
hp_remote_call:
    .cfi_startproc
    push %rbp
    .cfi_adjust_cfa_offset 8
    .cfi_offset %rbp, -16
    mov %rsp, %rbp
    .cfi_def_cfa_register %rbp
    push %rbx
    .cfi_offset %rbx, -24
    push %r12
    .cfi_offset %r12, -32
    push %r13
    .cfi_offset %r13, -40
    push %r13                 /* keeps the stack aligned */
    mov %rdi, %r12
    mov %rsi, %r13
    mov $0xd, %eax          /* CPUID.(0DH, 0).EBX: the XSAVE area's size */
    xor %ecx, %ecx
    cpuid
    mov %ebx, %ecx
    sub %rcx, %rsp
    and $-64, %rsp
    xor %eax, %eax          /* XRSTOR wants a clean header */
    mov %rax, 512(%rsp)
    mov %rax, 520(%rsp)
    mov %rax, 528(%rsp)
    mov %rax, 536(%rsp)
    mov %rax, 544(%rsp)
    mov %rax, 552(%rsp)
    mov %rax, 560(%rsp)
    mov %rax, 568(%rsp)
    mov $-1, %eax
    mov $-1, %edx
    xsave (%rsp)
    mov %r12, %rdi
    call hp_remote_dispatch
    mov $-1, %eax
    mov $-1, %edx
    xrstor (%rsp)
    mov %r13, hp_install_status+DONE_OFFSET(%rip)
    /* Wait here (futex, 1 s at most) for the daemon to stop the thread and
     * put it back itself: once past the stub's mask restore, a signal
     * handler could run with the stub's bytes still to come back to. A
     * daemon that died is not waited for longer. */
    lea -32(%rbp), %rsp
    sub $16, %rsp
    movq $1, (%rsp)            /* tv_sec */
    movq $0, 8(%rsp)           /* tv_nsec */
    mov $202, %eax             /* futex */
    lea hp_install_status+DONE_OFFSET(%rip), %rdi
    mov $0, %esi               /* FUTEX_WAIT */
    mov %r13, %rdx             /* while it holds the cookie (the low 32 bits) */
    mov %rsp, %r10
    xor %r8d, %r8d
    xor %r9d, %r9d
    syscall
    add $16, %rsp
    pop %r13
    pop %r13
    pop %r12
    pop %rbx
    pop %rbp
    .cfi_def_cfa %rsp, 8
    mov $DONE_SYSCALL, %eax
    ret
    .cfi_endproc
    .size hp_remote_call, .-hp_remote_call

/*
 * The wrapper of dlopen(file, mode) and dlmopen(lmid, file, mode). dlopen
 * decides the namespace and the RUNPATH it searches by its return address,
 * so it must see its caller's: it is called with the address of a `ret`
 * byte in the caller's page as its return address (hp_ret_gadget), and
 * that `ret` comes back here, to take the slots of what it loaded
 * (hp_after_dlopen) before returning to the caller. Where no such byte is
 * found, or the sampler is disabled, the call only forwards.
 */
#define WRAP_DLOPEN(name, orig)                  \
    .globl hp_wrap_##name;                       \
    .hidden hp_wrap_##name;                      \
    .type hp_wrap_##name, @function;             \
    .p2align 4;                                  \
hp_wrap_##name:                                  \
    .cfi_startproc;                              \
    push %rdi;                                   \
    .cfi_adjust_cfa_offset 8;                    \
    push %rsi;                                   \
    .cfi_adjust_cfa_offset 8;                    \
    push %rdx;                                   \
    .cfi_adjust_cfa_offset 8;                    \
    mov 24(%rsp), %rdi;                          \
    call hp_ret_gadget;                          \
    pop %rdx;                                    \
    .cfi_adjust_cfa_offset -8;                   \
    pop %rsi;                                    \
    .cfi_adjust_cfa_offset -8;                   \
    pop %rdi;                                    \
    .cfi_adjust_cfa_offset -8;                   \
    test %rax, %rax;                             \
    jz 1f;                                       \
    lea 2f(%rip), %r11;                          \
    push %r11;                                   \
    .cfi_adjust_cfa_offset 8;                    \
    push %rax;                                   \
    .cfi_adjust_cfa_offset 8;                    \
    jmp *hp_sampler_config+orig(%rip);           \
2:  .cfi_adjust_cfa_offset -16;                  \
    push %rax;                                   \
    .cfi_adjust_cfa_offset 8;                    \
    mov %rax, %rdi;                              \
    call hp_after_dlopen;                        \
    pop %rax;                                    \
    .cfi_adjust_cfa_offset -8;                   \
    ret;                                         \
1:  jmp *hp_sampler_config+orig(%rip);           \
    .cfi_endproc;                                \
    .size hp_wrap_##name, .-hp_wrap_##name

    WRAP_DLOPEN(dlopen, ORIG_DLOPEN)
    WRAP_DLOPEN(dlmopen, ORIG_DLMOPEN)

    .section .note.GNU-stack, "", @progbits
