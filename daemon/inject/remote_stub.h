/*
 * remote_stub.h - a place and a few bytes of code through which system
 * calls are run inside a stopped process, such that the process is never
 * left in a state it cannot continue from, even if heapprofd is killed at
 * any instant (the kernel then releases the threads as they are).
 *
 * The stub is `syscall` followed by code that puts back the thread's
 * signal mask, reloads every general register, the flags, the stack
 * pointer and the pc of the interrupted thread from data written beside
 * it, and jumps back. A thread pointed at
 * the stub and let go runs our system call and then carries on where it
 * was stopped; one pointed just past the `syscall` simply carries on. It
 * is written into the unused tail of the last page of a mapped library's
 * code (the file bytes past the end of its executable segment, which no
 * code reaches), and zeroed again afterwards.
 */
#ifndef HEAPPROF_REMOTE_STUB_H
#define HEAPPROF_REMOTE_STUB_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#include "proc_maps.h"

/* The stub's size: code, then the saved registers. */
#define REMOTE_STUB_SIZE 320

/* Finds REMOTE_STUB_SIZE unused, zero bytes at the end of an executable
 * file mapping of `pid` (memory open as `memfd`); 0 if none. */
uint64_t remote_stub_find_place(pid_t pid, int memfd, const struct proc_maps *maps);

/*
 * Fills `out` with the stub for address `at` returning to the state in
 * `regs`, with signal mask `sigmask`. A thread stopped inside a system call that the kernel would
 * restart is sent back to restart it (pc - 2, rax = the call number), as
 * the kernel does when no signal handler runs.
 */
void remote_stub_build(uint64_t at, const struct user_regs_struct *regs, uint64_t sigmask,
                       uint8_t out[REMOTE_STUB_SIZE]);

/* The registers a thread stopped with `stopped` resumes with when no
 * signal handler runs: a system call the kernel would restart is set to
 * run again (pc - 2, rax = the call number, orig_rax = -1). */
void remote_stub_resume_regs(const struct user_regs_struct *stopped,
                             struct user_regs_struct *out);

#endif
