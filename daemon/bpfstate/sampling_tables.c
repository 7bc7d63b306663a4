/*
 * sampling_tables.c - computes the sampling tables with libm (see
 * bpf/sampling_math.h for how they are used and why they exist).
 */
#include "sampling_tables.h"

#include <math.h>

void sampling_fill_log2_table(__u32 table[HP_LOG2_TABLE_LEN])
{
    const int steps = 1 << HP_LOG2_STEP_BITS;
    for (int i = 0; i < HP_LOG2_TABLE_LEN; i++)
        table[i] = i <= steps ? (__u32)llround(log2(1.0 + (double)i / steps) *
                                               (double)(1 << HP_LOG2_FIX_BITS))
                              : 0;
}

void sampling_fill_weight_table(__u64 table[HP_WEIGHT_TABLE_LEN])
{
    const double steps = 1 << HP_WEIGHT_STEP_BITS;
    table[0] = UINT64_MAX; /* x = 0 has no finite weight; never read */
    for (int i = 1; i < HP_WEIGHT_TABLE_LEN; i++) {
        double x = i <= HP_WEIGHT_TABLE_MAX ? i / steps : HP_WEIGHT_X_MAX;
        table[i] = (__u64)llround((double)(1 << HP_OBJ_SHIFT) / -expm1(-x));
    }
}
