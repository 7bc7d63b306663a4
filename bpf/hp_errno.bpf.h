// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * hp_errno.bpf.h - the errno values that BPF helpers return (negated) and
 * that our programs test for. BPF programs cannot include the C library's
 * errno.h, and vmlinux.h carries types, not macros, so the values the
 * programs compare against are named here once, as the kernel defines
 * them for every architecture (include/uapi/asm-generic/errno-base.h).
 */
#ifndef HEAPPROF_ERRNO_BPF_H
#define HEAPPROF_ERRNO_BPF_H

#ifndef ENOENT
#define ENOENT 2 /* no such element: bpf_find_vma found no mapping */
#endif
#ifndef EBUSY
#define EBUSY 16 /* bpf_find_vma could not take the address space's lock */
#endif
#ifndef EEXIST
#define EEXIST 17 /* a BPF_NOEXIST update found the key taken */
#endif

#endif
