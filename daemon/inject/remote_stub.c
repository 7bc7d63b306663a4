/*
 * remote_stub.c - the stub for system calls run inside a process (see
 * remote_stub.h), assembled here byte by byte: it is a fixed sequence of
 * RIP-relative loads, too small to need an assembler.
 */
#include "remote_stub.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc_info.h"

#define PAGE 4096ULL
/* Where the saved state starts in the stub: after its code (156 bytes). */
#define DATA_AT 160
/* Data slots: flags, the 16 registers in encoding order, the pc, the
 * signal mask. */
#define SLOT_FLAGS 0
#define SLOT_REG(r) (1 + (r))
#define SLOT_RIP 17
#define SLOT_SIGMASK 18
#define NR_RT_SIGPROCMASK 14
#define SIG_SETMASK_ 2

/* The kernel's restart codes (include/linux/errno.h, not in UAPI). */
#define ERESTARTSYS 512
#define ERESTARTNOINTR 513
#define ERESTARTNOHAND 514
#define ERESTART_RESTARTBLOCK 516
#define NR_RESTART_SYSCALL 219

/* Emits a RIP-relative disp32 to data slot `slot`, for an instruction
 * whose end is at `end` (offsets within the stub). */
static void disp_to(uint8_t *out, size_t at, size_t end, int slot)
{
    int32_t d = (int32_t)(DATA_AT + 8 * slot - (long)end);
    memcpy(out + at, &d, 4);
}

void remote_stub_resume_regs(const struct user_regs_struct *stopped,
                             struct user_regs_struct *out)
{
    *out = *stopped;
    int64_t rax = (int64_t)stopped->rax;
    if ((int64_t)stopped->orig_rax >= 0 &&
        (rax == -ERESTARTSYS || rax == -ERESTARTNOINTR || rax == -ERESTARTNOHAND ||
         rax == -ERESTART_RESTARTBLOCK)) {
        out->rax = rax == -ERESTART_RESTARTBLOCK ? NR_RESTART_SYSCALL : stopped->orig_rax;
        out->rip -= 2;
        out->orig_rax = (uint64_t)-1;
    }
}

/* Emits `mov $imm32, %e<reg>` (reg < 8) . */
static size_t mov_imm32(uint8_t *out, size_t n, int reg, uint32_t imm)
{
    out[n++] = (uint8_t)(0xb8 + reg);
    memcpy(out + n, &imm, 4);
    return n + 4;
}

void remote_stub_build(uint64_t at, const struct user_regs_struct *stopped, uint64_t sigmask,
                       uint8_t out[REMOTE_STUB_SIZE])
{
    (void)at; /* position independent */
    struct user_regs_struct r;
    remote_stub_resume_regs(stopped, &r);
    memset(out, 0xcc, REMOTE_STUB_SIZE);
    size_t n = 0;
    out[n++] = 0x0f; /* syscall */
    out[n++] = 0x05;
    /* rt_sigprocmask(SIG_SETMASK, &mask, NULL, 8): the thread's own mask
     * back (it runs our calls with every signal blocked). */
    n = mov_imm32(out, n, 0, NR_RT_SIGPROCMASK); /* %eax */
    n = mov_imm32(out, n, 7, SIG_SETMASK_);      /* %edi */
    out[n++] = 0x48; /* lea slot(%rip), %rsi */
    out[n++] = 0x8d;
    out[n++] = 0x35;
    disp_to(out, n, n + 4, SLOT_SIGMASK);
    n += 4;
    out[n++] = 0x31; /* xor %edx, %edx */
    out[n++] = 0xd2;
    out[n++] = 0x41; /* mov $8, %r10d */
    out[n++] = 0xba;
    uint32_t eight = 8;
    memcpy(out + n, &eight, 4);
    n += 4;
    out[n++] = 0x0f; /* syscall */
    out[n++] = 0x05;
    out[n++] = 0xff; /* pushq flags(%rip) */
    out[n++] = 0x35;
    disp_to(out, n, n + 4, SLOT_FLAGS);
    n += 4;
    out[n++] = 0x9d; /* popfq */
    for (int reg = 0; reg < 16; reg++) {
        if (reg == 4)
            continue; /* %rsp last */
        out[n++] = (uint8_t)(0x48 | (reg >= 8 ? 0x04 : 0)); /* mov slot(%rip), %reg */
        out[n++] = 0x8b;
        out[n++] = (uint8_t)(0x05 | ((reg & 7) << 3));
        disp_to(out, n, n + 4, SLOT_REG(reg));
        n += 4;
    }
    out[n++] = 0x48; /* mov slot(%rip), %rsp */
    out[n++] = 0x8b;
    out[n++] = 0x25;
    disp_to(out, n, n + 4, SLOT_REG(4));
    n += 4;
    out[n++] = 0xff; /* jmp *rip(%rip) */
    out[n++] = 0x25;
    disp_to(out, n, n + 4, SLOT_RIP);
    n += 4;

    uint64_t v[19];
    /* user_regs_struct order differs from the encoding order. */
    uint64_t enc[16] = {r.rax, r.rcx, r.rdx, r.rbx, r.rsp, r.rbp, r.rsi, r.rdi,
                        r.r8,  r.r9,  r.r10, r.r11, r.r12, r.r13, r.r14, r.r15};
    v[SLOT_FLAGS] = r.eflags;
    for (int reg = 0; reg < 16; reg++)
        v[SLOT_REG(reg)] = enc[reg];
    v[SLOT_RIP] = r.rip;
    v[SLOT_SIGMASK] = sigmask;
    _Static_assert(DATA_AT + sizeof(v) <= REMOTE_STUB_SIZE, "the stub's data fits");
    if (n > DATA_AT)
        abort(); /* the code grew into its data: a build error */
    memcpy(out + DATA_AT, v, sizeof(v));
}

/* The file bytes past the end of every loadable segment, from `from` on,
 * up to `to`: whether no segment claims any of [from, to). */
static int unclaimed(Elf *elf, uint64_t from, uint64_t to)
{
    size_t n;
    if (elf_getphdrnum(elf, &n) != 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(elf, (int)i, &ph))
            return 0;
        if (ph.p_type != PT_LOAD)
            continue;
        if (ph.p_offset < to && ph.p_offset + ph.p_filesz > from)
            return 0;
    }
    return 1;
}

uint64_t remote_stub_find_place(pid_t pid, int memfd, const struct proc_maps *maps)
{
    elf_version(EV_CURRENT);
    for (size_t i = 0; i < maps->n; i++) {
        const struct proc_mapping *m = &maps->v[i];
        if (!m->executable || m->writable || m->path[0] != '/' || m->end - m->start < PAGE)
            continue;
        char path[96];
        if (proc_map_file_path(pid, m->start, m->end, path, sizeof(path)) != 0)
            continue;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
        uint64_t at = m->end - REMOTE_STUB_SIZE;
        uint64_t file_at = m->offset + (at - m->start);
        int ok = elf && elf_kind(elf) == ELF_K_ELF &&
                 unclaimed(elf, file_at, file_at + REMOTE_STUB_SIZE);
        if (elf)
            elf_end(elf);
        close(fd);
        uint8_t now[REMOTE_STUB_SIZE], zero[REMOTE_STUB_SIZE] = {0};
        if (ok && pread(memfd, now, sizeof(now), (off_t)at) == (ssize_t)sizeof(now) &&
            memcmp(now, zero, sizeof(now)) == 0)
            return at;
    }
    return 0;
}
