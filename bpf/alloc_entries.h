/*
 * alloc_entries.h - the one list of the functions heapprofd interposes on:
 * the C allocator's entries, operator new and delete in every form, and
 * the allocators' own families (jemalloc's *allocx, tcmalloc's tc_*,
 * mimalloc's mi_*) that programs and language runtimes call directly.
 *
 * Each row is X(symbol, kind, family): the exported name, what kind of
 * call it is (enum hp_kind in heapprof.h: where its size, old pointer and
 * result are), and the family it belongs to. Everything that needs the list
 * is made from it, so a new entry is one row:
 *  - the uprobe sampler's resolver probes each row's definition
 *    (daemon/attach/allocator_names.c), and its BPF programs read the
 *    arguments by the row's kind (heapprof.bpf.c);
 *  - the in-process sampler has one wrapper and one slot name per row
 *    (sampler/sampler.c, sampler/slots.c), in this order (enum hp_entry);
 *  - profiles drop every row's frame from the leaf end of a stack
 *    (allocator_is_allocator_name()).
 *
 * Only names some library on Debian 12 exports (nm -D of libc.so.6,
 * libstdc++.so.6, libjemalloc.so.2, libtcmalloc_minimal.so.4,
 * libmimalloc.so.2) are rows. Aliases at one address (tcmalloc's free,
 * tc_free and _ZdlPv) are probed once, and each gets a wrapper.
 *
 * Rows an allocator only jumps to are here too, so that their code counts
 * as the allocator's: mimalloc's nothrow operator new jumps to
 * mi_new_nothrow, whose call of mi_malloc_aligned would otherwise be
 * counted a second time.
 *
 * The loader's two rows come first: report.S reaches their slots'
 * targets by offset, which a longer list must not move.
 *
 * Plain preprocessor only: included by the BPF programs, the sampler
 * (built without libc) and the daemon.
 */
#ifndef HEAPPROF_ALLOC_ENTRIES_H
#define HEAPPROF_ALLOC_ENTRIES_H

/* The families, for the page and for readers of the list. */
#define HP_FAMILY_LOADER 0   /* the dynamic linker: modules loaded later get their slots */
#define HP_FAMILY_C 1        /* malloc and friends, as every allocator exports them */
#define HP_FAMILY_CXX 2      /* operator new and delete (Itanium C++ ABI names, x86-64) */
#define HP_FAMILY_JEMALLOC 3 /* jemalloc's non-standard API */
#define HP_FAMILY_TCMALLOC 4 /* gperftools' tc_* */
#define HP_FAMILY_MIMALLOC 5 /* mimalloc's mi_* */

#define HP_ALLOC_ENTRIES(X)                                                        \
    X(dlopen, HP_LOADER, HP_FAMILY_LOADER)                                         \
    X(dlmopen, HP_LOADER, HP_FAMILY_LOADER)                                        \
    /* C: malloc first, its object is the one a profile shows as the allocator */ \
    X(malloc, HP_MALLOC, HP_FAMILY_C)                                              \
    X(calloc, HP_CALLOC, HP_FAMILY_C)                                              \
    X(realloc, HP_REALLOC, HP_FAMILY_C)                                            \
    X(reallocarray, HP_REALLOCARRAY, HP_FAMILY_C)                                  \
    X(posix_memalign, HP_POSIX_MEMALIGN, HP_FAMILY_C)                              \
    X(aligned_alloc, HP_ALIGNED_ALLOC, HP_FAMILY_C)                                \
    X(memalign, HP_ALIGNED_ALLOC, HP_FAMILY_C)                                     \
    X(valloc, HP_VALLOC, HP_FAMILY_C)                                              \
    X(pvalloc, HP_VALLOC, HP_FAMILY_C)                                             \
    X(free, HP_FREE, HP_FAMILY_C)                                                  \
    X(free_sized, HP_FREE, HP_FAMILY_C)                                            \
    X(free_aligned_sized, HP_FREE, HP_FAMILY_C)                                    \
    /* operator new(size_t), new[], and their nothrow and aligned forms */         \
    X(_Znwm, HP_NEW, HP_FAMILY_CXX)                                                \
    X(_ZnwmRKSt9nothrow_t, HP_NEW, HP_FAMILY_CXX)                                  \
    X(_ZnwmSt11align_val_t, HP_NEW, HP_FAMILY_CXX)                                 \
    X(_ZnwmSt11align_val_tRKSt9nothrow_t, HP_NEW, HP_FAMILY_CXX)                   \
    X(_Znam, HP_NEW_ARRAY, HP_FAMILY_CXX)                                          \
    X(_ZnamRKSt9nothrow_t, HP_NEW_ARRAY, HP_FAMILY_CXX)                            \
    X(_ZnamSt11align_val_t, HP_NEW_ARRAY, HP_FAMILY_CXX)                           \
    X(_ZnamSt11align_val_tRKSt9nothrow_t, HP_NEW_ARRAY, HP_FAMILY_CXX)             \
    /* operator delete and delete[]: plain, sized, aligned, sized+aligned, nothrow */ \
    X(_ZdlPv, HP_FREE, HP_FAMILY_CXX)                                              \
    X(_ZdaPv, HP_FREE, HP_FAMILY_CXX)                                              \
    X(_ZdlPvm, HP_FREE, HP_FAMILY_CXX)                                             \
    X(_ZdaPvm, HP_FREE, HP_FAMILY_CXX)                                             \
    X(_ZdlPvSt11align_val_t, HP_FREE, HP_FAMILY_CXX)                               \
    X(_ZdaPvSt11align_val_t, HP_FREE, HP_FAMILY_CXX)                               \
    X(_ZdlPvmSt11align_val_t, HP_FREE, HP_FAMILY_CXX)                              \
    X(_ZdaPvmSt11align_val_t, HP_FREE, HP_FAMILY_CXX)                              \
    X(_ZdlPvRKSt9nothrow_t, HP_FREE, HP_FAMILY_CXX)                                \
    X(_ZdaPvRKSt9nothrow_t, HP_FREE, HP_FAMILY_CXX)                                \
    X(_ZdlPvSt11align_val_tRKSt9nothrow_t, HP_FREE, HP_FAMILY_CXX)                 \
    X(_ZdaPvSt11align_val_tRKSt9nothrow_t, HP_FREE, HP_FAMILY_CXX)                 \
    /* jemalloc: mallocx(size, flags), rallocx(p, size, flags),                    \
     * xallocx(p, size, extra, flags), sdallocx(p, size, flags), dallocx(p, flags) */ \
    X(mallocx, HP_MALLOC, HP_FAMILY_JEMALLOC)                                      \
    X(rallocx, HP_REALLOC, HP_FAMILY_JEMALLOC)                                     \
    X(xallocx, HP_XALLOCX, HP_FAMILY_JEMALLOC)                                     \
    X(sdallocx, HP_FREE, HP_FAMILY_JEMALLOC)                                       \
    X(dallocx, HP_FREE, HP_FAMILY_JEMALLOC)                                        \
    /* tcmalloc: every tc_* that allocates or frees */                             \
    X(tc_malloc, HP_MALLOC, HP_FAMILY_TCMALLOC)                                    \
    X(tc_malloc_skip_new_handler, HP_MALLOC, HP_FAMILY_TCMALLOC)                   \
    X(tc_calloc, HP_CALLOC, HP_FAMILY_TCMALLOC)                                    \
    X(tc_realloc, HP_REALLOC, HP_FAMILY_TCMALLOC)                                  \
    X(tc_memalign, HP_ALIGNED_ALLOC, HP_FAMILY_TCMALLOC)                           \
    X(tc_posix_memalign, HP_POSIX_MEMALIGN, HP_FAMILY_TCMALLOC)                    \
    X(tc_valloc, HP_VALLOC, HP_FAMILY_TCMALLOC)                                    \
    X(tc_pvalloc, HP_VALLOC, HP_FAMILY_TCMALLOC)                                   \
    X(tc_free, HP_FREE, HP_FAMILY_TCMALLOC)                                        \
    X(tc_cfree, HP_FREE, HP_FAMILY_TCMALLOC)                                       \
    X(tc_free_sized, HP_FREE, HP_FAMILY_TCMALLOC)                                  \
    X(tc_new, HP_NEW, HP_FAMILY_TCMALLOC)                                          \
    X(tc_new_nothrow, HP_NEW, HP_FAMILY_TCMALLOC)                                  \
    X(tc_new_aligned, HP_NEW, HP_FAMILY_TCMALLOC)                                  \
    X(tc_new_aligned_nothrow, HP_NEW, HP_FAMILY_TCMALLOC)                          \
    X(tc_newarray, HP_NEW_ARRAY, HP_FAMILY_TCMALLOC)                               \
    X(tc_newarray_nothrow, HP_NEW_ARRAY, HP_FAMILY_TCMALLOC)                       \
    X(tc_newarray_aligned, HP_NEW_ARRAY, HP_FAMILY_TCMALLOC)                       \
    X(tc_newarray_aligned_nothrow, HP_NEW_ARRAY, HP_FAMILY_TCMALLOC)               \
    X(tc_delete, HP_FREE, HP_FAMILY_TCMALLOC)                                      \
    X(tc_deletearray, HP_FREE, HP_FAMILY_TCMALLOC)                                 \
    X(tc_delete_sized, HP_FREE, HP_FAMILY_TCMALLOC)                                \
    X(tc_deletearray_sized, HP_FREE, HP_FAMILY_TCMALLOC)                           \
    X(tc_delete_nothrow, HP_FREE, HP_FAMILY_TCMALLOC)                              \
    X(tc_deletearray_nothrow, HP_FREE, HP_FAMILY_TCMALLOC)                         \
    X(tc_delete_aligned, HP_FREE, HP_FAMILY_TCMALLOC)                              \
    X(tc_deletearray_aligned, HP_FREE, HP_FAMILY_TCMALLOC)                         \
    X(tc_delete_sized_aligned, HP_FREE, HP_FAMILY_TCMALLOC)                        \
    X(tc_deletearray_sized_aligned, HP_FREE, HP_FAMILY_TCMALLOC)                   \
    X(tc_delete_aligned_nothrow, HP_FREE, HP_FAMILY_TCMALLOC)                      \
    X(tc_deletearray_aligned_nothrow, HP_FREE, HP_FAMILY_TCMALLOC)                 \
    /* mimalloc: mi_mallocn(n, size), mi_reallocn(p, n, size),                     \
     * mi_*_aligned(..., size, align): the size where the C kind has it */         \
    X(mi_malloc, HP_MALLOC, HP_FAMILY_MIMALLOC)                                    \
    X(mi_zalloc, HP_MALLOC, HP_FAMILY_MIMALLOC)                                    \
    X(mi_calloc, HP_CALLOC, HP_FAMILY_MIMALLOC)                                    \
    X(mi_mallocn, HP_CALLOC, HP_FAMILY_MIMALLOC)                                   \
    X(mi_realloc, HP_REALLOC, HP_FAMILY_MIMALLOC)                                  \
    X(mi_reallocn, HP_REALLOCARRAY, HP_FAMILY_MIMALLOC)                            \
    X(mi_malloc_aligned, HP_MALLOC, HP_FAMILY_MIMALLOC)                            \
    X(mi_zalloc_aligned, HP_MALLOC, HP_FAMILY_MIMALLOC)                            \
    X(mi_calloc_aligned, HP_CALLOC, HP_FAMILY_MIMALLOC)                            \
    X(mi_realloc_aligned, HP_REALLOC, HP_FAMILY_MIMALLOC)                          \
    X(mi_free, HP_FREE, HP_FAMILY_MIMALLOC)                                        \
    X(mi_free_size, HP_FREE, HP_FAMILY_MIMALLOC)                                   \
    X(mi_free_aligned, HP_FREE, HP_FAMILY_MIMALLOC)                                \
    X(mi_free_size_aligned, HP_FREE, HP_FAMILY_MIMALLOC)                           \
    X(mi_new_nothrow, HP_NEW_TARGET, HP_FAMILY_MIMALLOC)                           \
    X(mi_new_aligned_nothrow, HP_NEW_TARGET, HP_FAMILY_MIMALLOC)

/* Each row's index: the in-process sampler's orig[] and slot names. */
#define HP_ENTRY_ENUM_ROW(sym, kind, family) HP_E_##sym,
enum hp_entry {
    HP_ALLOC_ENTRIES(HP_ENTRY_ENUM_ROW)
    HP_ENTRY_COUNT,
};
#undef HP_ENTRY_ENUM_ROW

#endif
