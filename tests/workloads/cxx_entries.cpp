/*
 * cxx_entries.cpp - every form of operator new and delete, and (built with
 * -DFAMILY_JEMALLOC, _TCMALLOC or _MIMALLOC and linked to that allocator)
 * the allocator's own API called directly, for exact totals at interval 1
 * (test_entries.py): each allocating function below is the leaf of its
 * samples, with the counts and sizes its comment gives.
 *
 * The operators are called by name (::operator new(n, std::nothrow), ...),
 * so that each mangled form is called exactly as written; every pointer is
 * kept in a global array, so that the compiler drops no allocation.
 */
#include <cstddef>
#include <new>

extern "C" {
#include "handshake.h"
}

#if defined(FAMILY_JEMALLOC)
extern "C" void *mallocx(size_t size, int flags);
extern "C" void *rallocx(void *p, size_t size, int flags);
extern "C" void sdallocx(void *p, size_t size, int flags);
extern "C" void dallocx(void *p, int flags);
#elif defined(FAMILY_TCMALLOC)
extern "C" void *tc_malloc(size_t size);
extern "C" void tc_free(void *p);
extern "C" void *tc_new(size_t size);
extern "C" void tc_delete(void *p);
#elif defined(FAMILY_MIMALLOC)
extern "C" void *mi_malloc(size_t size);
extern "C" void *mi_zalloc_aligned(size_t size, size_t alignment);
extern "C" void *mi_realloc(void *p, size_t size);
extern "C" void mi_free(void *p);
#endif

/* Calls of each allocating function, and how many of them it frees. */
#define N 20
#define ALIGN std::align_val_t(64)

static void *kept[16][N];

static void touch(void *p, size_t size)
{
    handshake_touch(p, size);
}

/* 20 x operator new(100); 10 freed by delete(p), 5 by delete(p, n). */
__attribute__((noinline)) void new_plain(void **v)
{
    for (int i = 0; i < N; i++)
        touch(v[i] = ::operator new(100), 100);
}

/* 20 x operator new[](200); 10 freed by delete[](p), 5 by delete[](p, n). */
__attribute__((noinline)) void new_array(void **v)
{
    for (int i = 0; i < N; i++)
        touch(v[i] = ::operator new[](200), 200);
}

/* 20 x operator new(300, nothrow); 10 freed by delete(p, nothrow). */
__attribute__((noinline)) void new_nothrow(void **v)
{
    for (int i = 0; i < N; i++)
        touch(v[i] = ::operator new(300, std::nothrow), 300);
}

/* 20 x operator new[](400, nothrow); 10 freed by delete[](p, nothrow). */
__attribute__((noinline)) void new_array_nothrow(void **v)
{
    for (int i = 0; i < N; i++)
        touch(v[i] = ::operator new[](400, std::nothrow), 400);
}

/* 20 x operator new(512, align 64); 10 freed by delete(p, align), 5 by
 * delete(p, n, align), 2 by delete(p, align, nothrow). */
__attribute__((noinline)) void new_aligned(void **v)
{
    for (int i = 0; i < N; i++)
        touch(v[i] = ::operator new(512, ALIGN), 512);
}

/* 20 x operator new[](1024, align 64); the same frees in their [] forms. */
__attribute__((noinline)) void new_array_aligned(void **v)
{
    for (int i = 0; i < N; i++)
        touch(v[i] = ::operator new[](1024, ALIGN), 1024);
}

/* 20 x operator new(576, align 64, nothrow); 10 freed by delete(p, align). */
__attribute__((noinline)) void new_aligned_nothrow(void **v)
{
    for (int i = 0; i < N; i++)
        touch(v[i] = ::operator new(576, ALIGN, std::nothrow), 576);
}

/* 20 x operator new[](640, align 64, nothrow); 10 freed by delete[](p, align). */
__attribute__((noinline)) void new_array_aligned_nothrow(void **v)
{
    for (int i = 0; i < N; i++)
        touch(v[i] = ::operator new[](640, ALIGN, std::nothrow), 640);
}

/* operator new and new[] that throw std::bad_alloc (2^62 bytes), caught
 * here: the sampler's wrapper must leave the exception a stack the
 * unwinder can walk. Nothing is allocated, nothing is counted. */
__attribute__((noinline)) void new_throws(void)
{
    for (int i = 0; i < 2; i++) {
        try {
            kept[15][i] = i ? ::operator new[](size_t(1) << 62) : ::operator new(size_t(1) << 62);
            handshake_die("operator new of 2^62 bytes returned");
        } catch (const std::bad_alloc &) {
        }
    }
}

/* Every form of delete, on the blocks of the functions above. */
__attribute__((noinline)) void delete_all_forms(void)
{
    for (int i = 0; i < 10; i++) {
        ::operator delete(kept[0][i]);
        ::operator delete[](kept[1][i]);
        ::operator delete(kept[2][i], std::nothrow);
        ::operator delete[](kept[3][i], std::nothrow);
        ::operator delete(kept[4][i], ALIGN);
        ::operator delete[](kept[5][i], ALIGN);
        ::operator delete(kept[6][i], ALIGN);
        ::operator delete[](kept[7][i], ALIGN);
    }
    for (int i = 10; i < 15; i++) {
        ::operator delete(kept[0][i], size_t(100));
        ::operator delete[](kept[1][i], size_t(200));
        ::operator delete(kept[4][i], size_t(512), ALIGN);
        ::operator delete[](kept[5][i], size_t(1024), ALIGN);
    }
    for (int i = 15; i < 17; i++) {
        ::operator delete(kept[4][i], ALIGN, std::nothrow);
        ::operator delete[](kept[5][i], ALIGN, std::nothrow);
    }
}

#if defined(FAMILY_JEMALLOC)
/* 20 x mallocx(700, 0): 10 freed by sdallocx, 5 by dallocx. */
__attribute__((noinline)) void family_alloc(void **v)
{
    for (int i = 0; i < N; i++)
        touch(v[i] = mallocx(700, 0), 700);
}
/* 20 x mallocx(50) then rallocx(p, 5000): freed by sdallocx, 5 kept. */
__attribute__((noinline)) void family_resize(void **v)
{
    for (int i = 0; i < N; i++) {
        void *p = mallocx(50, 0);
        touch(p, 50);
        touch(v[i] = rallocx(p, 5000, 0), 5000);
    }
}
static void family_free(void)
{
    for (int i = 0; i < 10; i++)
        sdallocx(kept[8][i], 700, 0);
    for (int i = 10; i < 15; i++)
        dallocx(kept[8][i], 0);
    for (int i = 0; i < 15; i++)
        sdallocx(kept[9][i], 5000, 0);
}
#elif defined(FAMILY_TCMALLOC)
/* 20 x tc_malloc(700): 15 freed by tc_free. */
__attribute__((noinline)) void family_alloc(void **v)
{
    for (int i = 0; i < N; i++)
        touch(v[i] = tc_malloc(700), 700);
}
/* 20 x tc_new(5000): 15 freed by tc_delete. */
__attribute__((noinline)) void family_resize(void **v)
{
    for (int i = 0; i < N; i++)
        touch(v[i] = tc_new(5000), 5000);
}
static void family_free(void)
{
    for (int i = 0; i < 15; i++) {
        tc_free(kept[8][i]);
        tc_delete(kept[9][i]);
    }
}
#elif defined(FAMILY_MIMALLOC)
/* 20 x mi_malloc(700): 15 freed by mi_free. */
__attribute__((noinline)) void family_alloc(void **v)
{
    for (int i = 0; i < N; i++)
        touch(v[i] = mi_malloc(700), 700);
}
/* 20 x mi_zalloc_aligned(50, 64) then mi_realloc(p, 5000): 15 freed. */
__attribute__((noinline)) void family_resize(void **v)
{
    for (int i = 0; i < N; i++) {
        void *p = mi_zalloc_aligned(50, 64);
        touch(p, 50);
        touch(v[i] = mi_realloc(p, 5000), 5000);
    }
}
static void family_free(void)
{
    for (int i = 0; i < 15; i++) {
        mi_free(kept[8][i]);
        mi_free(kept[9][i]);
    }
}
#endif

int main(int argc, char **argv)
{
    /* Debian's mimalloc aborts where operator new would throw. */
    bool throws = !(argc > 1 && argv[1][0] == 'n');
    handshake_ready();
    if (!handshake_wait_line())
        return 0;
    new_plain(kept[0]);
    new_array(kept[1]);
    new_nothrow(kept[2]);
    new_array_nothrow(kept[3]);
    new_aligned(kept[4]);
    new_array_aligned(kept[5]);
    new_aligned_nothrow(kept[6]);
    new_array_aligned_nothrow(kept[7]);
    delete_all_forms();
    if (throws)
        new_throws();
#if defined(FAMILY_JEMALLOC) || defined(FAMILY_TCMALLOC) || defined(FAMILY_MIMALLOC)
    family_alloc(kept[8]);
    family_resize(kept[9]);
    family_free();
#endif
    handshake_done();
    handshake_wait_line();
    return 0;
}
