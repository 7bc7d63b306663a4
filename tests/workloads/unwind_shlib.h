/*
 * unwind_shlib.h - the shared library of the unwind workload
 * (libunwind_shlib.so, unwind_shlib.c): functions the executable calls and
 * that call back into it, so its call chains cross the library both ways.
 */
#ifndef HEAPPROF_WORKLOAD_UNWIND_SHLIB_H
#define HEAPPROF_WORKLOAD_UNWIND_SHLIB_H

/* A function of the executable the library calls back. */
typedef void (*unwind_callback)(int arg);

/* lib_chain_1 -> lib_chain_2 -> callback(arg): two library frames. */
void lib_chain_1(unwind_callback callback, int arg);

/* lib_alloc_chain -> lib_alloc, which makes `count` x malloc(size) inside
 * the library. */
void lib_alloc_chain(int count, unsigned long size);

/* lib_to_exe -> callback(arg): one library frame, then the executable. */
void lib_to_exe(unwind_callback callback, int arg);

#endif
