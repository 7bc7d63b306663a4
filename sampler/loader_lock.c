/*
 * loader_lock.c - the dynamic linker's load lock, taken by the installer
 * (slots.c) with a bounded wait, inside the process and without libc.
 *
 * Why this lock: glibc's dlopen and dlclose hold `_dl_load_lock` for all
 * the time they change the list of modules and map or unmap them, so a
 * walk of the list under it sees every module whole and mapped. glibc
 * makes it free again in a fork child (posix/fork.c), so a child never
 * starts with it held by a thread it does not have. The list's other
 * lock, which dl_iterate_phdr takes, is not made free there.
 *
 * Why our own lock and unlock rather than libc's: glibc's rtld locks are
 * recursive pthread mutexes, whose layout is the public ABI (static
 * initializers are compiled into programs) and whose protocol for this
 * kind is small: the owner's tid and a count for recursion, and a futex
 * word that is 0 when free, 1 when held and 2 when held with waiters,
 * woken at unlock. Calling libc would need its functions resolved for each
 * libc, and would tie the wait to its unbounded lock.
 *
 * Never a wait without end: a held lock is tried again every
 * LOCK_POLL_NS for LOCK_WAIT_NS at most (-EBUSY then), and a lock whose
 * owner is no thread of this process is never waited for (-EOWNERDEAD):
 * nobody would ever give it back.
 */
#include "hp_sampler.h"

typedef __u64 u64;
typedef __u32 u32;
#define HIDDEN __attribute__((visibility("hidden")))

extern struct hp_sampler_config hp_sampler_config HIDDEN;
extern struct hp_install_status hp_install_status HIDDEN;

/* How long a held lock is waited for: a dlopen whose constructors run
 * longer than this makes the attach fall back. Well below the daemon's
 * THREAD_CALL_TIMEOUT_MS, so that the installer always answers. */
#define LOCK_WAIT_NS 250000000LL
/* How often a held lock is tried again. */
#define LOCK_POLL_NS 200000LL
/* The mutex kind of glibc's rtld locks (PTHREAD_MUTEX_RECURSIVE_NP), in
 * the low bits of __kind. */
#define KIND_RECURSIVE 1
#define KIND_TYPE_MASK 0x7f
#define KIND_PSHARED 128

/* The prefix of glibc's pthread_mutex_t on x86-64 (struct __pthread_mutex_s). */
struct glibc_mutex {
    int lock;
    u32 count;
    int owner;
    u32 nusers;
    int kind;
};

static long sys3(long nr, long a, long b, long c)
{
    long r;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "a"(nr), "D"(a), "S"(b), "d"(c)
                     : "rcx", "r11", "memory");
    return r;
}

static long sys6(long nr, long a, long b, long c, long d, long e, long f)
{
    long r;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return r;
}

#define SYS_NANOSLEEP 35
#define SYS_GETPID 39
#define SYS_GETTID 186
#define SYS_FUTEX 202
#define SYS_CLOCK_GETTIME 228
#define SYS_TGKILL 234
#define FUTEX_WAKE 1
#define FUTEX_PRIVATE 128
#define CLOCK_MONOTONIC 1
#define ESRCH 3
#define EBUSY 16
#define EINVAL 22
#define EOWNERDEAD 130

struct kts {
    long sec, nsec;
};

static long long now_ns(void)
{
    struct kts t = {0, 0};
    sys3(SYS_CLOCK_GETTIME, CLOCK_MONOTONIC, (long)&t, 0);
    return t.sec * 1000000000LL + t.nsec;
}

static struct glibc_mutex *load_lock(void)
{
    return (struct glibc_mutex *)hp_sampler_config.load_lock;
}

/* One try: 0 if this thread holds the lock now. */
static int try_once(struct glibc_mutex *m, int tid)
{
    if (__atomic_load_n(&m->owner, __ATOMIC_RELAXED) == tid) {
        if (m->count + 1 == 0)
            return -EBUSY;
        m->count++;
        return 0;
    }
    int free = 0;
    if (!__atomic_compare_exchange_n(&m->lock, &free, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return -EBUSY;
    __atomic_store_n(&m->owner, tid, __ATOMIC_RELAXED);
    m->count = 1;
    m->nusers++;
    return 0;
}

HIDDEN int hp_loader_lock_known(void)
{
    return hp_sampler_config.load_lock != 0;
}

/*
 * Takes the load lock: 0, or -EBUSY (held for all of LOCK_WAIT_NS, or in
 * a state this code does not know), -EOWNERDEAD (held by a thread that is
 * not in this process: a fork child's copy of a lock held at the fork).
 */
HIDDEN int hp_loader_lock(void)
{
    struct glibc_mutex *m = load_lock();
    if ((m->kind & KIND_TYPE_MASK) != KIND_RECURSIVE)
        return -EINVAL;
    int tid = (int)sys3(SYS_GETTID, 0, 0, 0), pid = (int)sys3(SYS_GETPID, 0, 0, 0);
    long long deadline = now_ns() + LOCK_WAIT_NS;
    for (;;) {
        if (try_once(m, tid) == 0)
            return 0;
        /* An owner of 0 is a lock or unlock half done: wait for it. */
        int owner = __atomic_load_n(&m->owner, __ATOMIC_RELAXED);
        if (owner > 0 && sys3(SYS_TGKILL, pid, owner, 0) == -ESRCH) {
            __atomic_fetch_add(&hp_install_status.lock_dead_owner, 1, __ATOMIC_RELAXED);
            return -EOWNERDEAD;
        }
        if (now_ns() > deadline) {
            __atomic_fetch_add(&hp_install_status.lock_timeouts, 1, __ATOMIC_RELAXED);
            return -EBUSY;
        }
        struct kts t = {0, LOCK_POLL_NS};
        sys3(SYS_NANOSLEEP, (long)&t, 0, 0);
    }
}

/* Gives the load lock back, waking a waiter as glibc's unlock does. */
HIDDEN void hp_loader_unlock(void)
{
    struct glibc_mutex *m = load_lock();
    if (--m->count != 0)
        return;
    __atomic_store_n(&m->owner, 0, __ATOMIC_RELAXED);
    m->nusers--;
    if (__atomic_exchange_n(&m->lock, 0, __ATOMIC_RELEASE) > 1)
        sys6(SYS_FUTEX, (long)&m->lock, FUTEX_WAKE | ((m->kind & KIND_PSHARED) ? 0 : FUTEX_PRIVATE),
             1, 0, 0, 0);
}
