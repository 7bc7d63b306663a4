/*
 * report.S - the sampler's report functions and trampoline slots.
 *
 * hp_report_alloc(ptr, size, kind, ret, sp) and hp_report_free(ptr) do
 * nothing: the daemon's uprobes on them read their arguments. Each is a
 * one-byte nop (which the kernel emulates at the probe, no single step)
 * and a return.
 *
 * Not a 5-byte nop, although Linux 6.18 "optimizes" a uprobe on one into a
 * call to a [uprobes-trampoline] mapping: that mapping is not inherited by
 * fork(), while the call written into the probed page is, so every forked
 * child that reached a report function died of SIGSEGV at the trampoline's
 * address (seen here with tests/workloads/stress.c). A 2-byte function
 * cannot hold that call. The optimization saved about 30 ns of 495 per
 * sampled call here (../shared/design.md); a crash is not worth it.
 *
 * hp_tramp_NAME: HP_TRAMP_SIZE bytes per allocator function, int3 until the
 * daemon writes there the function's first instructions, relocated, and a
 * jump back to the rest of it. Page aligned, in their own page, so that the
 * daemon's writes copy that page only and not the report functions'.
 */
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

    .section .text.hp_tramp, "ax", @progbits
    .p2align 12
#define TRAMP(name)                     \
    .globl hp_tramp_##name;             \
    .hidden hp_tramp_##name;            \
    .type hp_tramp_##name, @function;   \
hp_tramp_##name:                        \
    .fill 64, 1, 0xcc;                  \
    .size hp_tramp_##name, 64
    TRAMP(malloc)
    TRAMP(calloc)
    TRAMP(realloc)
    TRAMP(reallocarray)
    TRAMP(posix_memalign)
    TRAMP(aligned_alloc)
    TRAMP(memalign)
    TRAMP(valloc)
    TRAMP(pvalloc)
    TRAMP(free)
    TRAMP(free_sized)
    TRAMP(free_aligned_sized)
    .p2align 12

    .section .note.GNU-stack, "", @progbits
