/*
 * cxx_symbols.cpp - a C++ workload whose allocations come from templates,
 * lambdas, std containers and a forced-inline function, for
 * tests/integration/test_symbols.py: its profile must show demangled short
 * names, files and lines that match addr2line, and inlined calls as frames
 * of their own.
 *
 * Allocations after "go" (all kept until exit):
 *   shapes::Grid<long>::grow: push_back of 1000 longs through a std::vector
 *     whose allocator calls malloc, so every reallocation's stack runs
 *     vector::_M_realloc_insert -> _Vector_base::_M_allocate ->
 *     allocator_traits::allocate -> shapes::MallocAllocator::allocate, all
 *     inlined into one frame at -O1;
 *   shapes::label_all: 10 x shapes::make_label(32), forced inline;
 *   main::{lambda(int)#1}: 5 x new std::string(100, 'x'), through operator
 *     new (whose frames must be dropped).
 * The allocator is ours (malloc from code with frame pointers) so that the
 * frame that grows the vector is the leaf: libstdc++'s operator new has no
 * frame pointer, and a frame-pointer walk from inside it skips its caller.
 */
#include <cstdlib>
#include <string>
#include <vector>

extern "C" {
#include "handshake.h"
}

namespace shapes {

/* A std allocator that calls malloc itself. */
template <typename T> struct MallocAllocator {
    using value_type = T;
    MallocAllocator() = default;
    template <typename U> MallocAllocator(const MallocAllocator<U> &) {}
    T *allocate(std::size_t n)
    {
        void *p = std::malloc(n * sizeof(T));
        if (!p)
            handshake_die("cxx_symbols: out of memory");
        return static_cast<T *>(p);
    }
    void deallocate(T *p, std::size_t) { std::free(p); }
};
template <typename T, typename U>
bool operator==(const MallocAllocator<T> &, const MallocAllocator<U> &)
{
    return true;
}
template <typename T, typename U>
bool operator!=(const MallocAllocator<T> &, const MallocAllocator<U> &)
{
    return false;
}

/* A growing array of cells: push_back reallocates as it grows. */
template <typename T> struct Grid {
    std::vector<T, MallocAllocator<T>> cells;
    __attribute__((noinline)) void grow(int n)
    {
        for (int i = 0; i < n; i++)
            cells.push_back(T(i));
    }
};

/* Inlined into every caller whatever the flags; not static, so that the
 * debug information carries its linkage name (addr2line, the tests'
 * oracle, names inlined functions without one after their caller). */
inline __attribute__((always_inline)) char *make_label(std::size_t n)
{
    return static_cast<char *>(std::malloc(n));
}

char *labels[10];

__attribute__((noinline)) void label_all()
{
    for (int i = 0; i < 10; i++)
        labels[i] = make_label(32);
}

} // namespace shapes

static std::string *strings[5];

int main()
{
    handshake_ready();
    if (!handshake_wait_line())
        return 1;
    static shapes::Grid<long> grid;
    grid.grow(1000);
    shapes::label_all();
    auto make = [](int n) __attribute__((noinline)) { return new std::string(n, 'x'); };
    for (int i = 0; i < 5; i++)
        strings[i] = make(100);
    handshake_done();
    handshake_wait_line();
    return 0;
}
