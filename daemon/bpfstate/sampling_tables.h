/*
 * sampling_tables.h - fills the tables that bpf/sampling_math.h reads, with
 * libm, in userspace. The BPF side gets them as read-only data at load.
 */
#ifndef HEAPPROF_SAMPLING_TABLES_H
#define HEAPPROF_SAMPLING_TABLES_H

#include <stdint.h>

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
#include "sampling_math.h"

/* log2(1 + i/256) for i = 0..256 in units of 2^-24. */
void sampling_fill_log2_table(__u32 table[HP_LOG2_TABLE_LEN]);
/* 1/(1 - exp(-i/256)) in units of 2^-16; entry 0 (x = 0) is unused. */
void sampling_fill_weight_table(__u64 table[HP_WEIGHT_TABLE_LEN]);

#endif
