/* What the probe loops compiled into probes._native share (each probe's probes/<name>/_loop.c, found
 * by probes/build.py): a clock, log buckets, CPU sets from Python, a latch, runs held by capsules, what
 * _native.c defines for them, and how a loop file registers its functions.
 *
 * Include it first: it includes <Python.h> (bucket lists are Python lists) and the system headers the
 * loops share, with _GNU_SOURCE (CPU sets, gettid).
 *
 * Clock: the caller passes the TSC rate it measured (probes/_native.c tsc_info, through the probe's
 * hello line) when the TSC may be compared across CPUs: invariant (constant_tsc + nonstop_tsc) AND
 * the kernel's own clocksource, so the kernel has checked that every CPU's TSC agrees. A rate of 0
 * means CLOCK_MONOTONIC, read through the vDSO: ~2.5x the cost of rdtsc here (22 ns against 9 ns).
 *
 * Buckets: one scheme for every probe (values below 8 units get one bucket each; above, every power
 * of two is split into 8 equal sub-buckets, like HdrHistogram with 3 significant bits, so a bucket is
 * at most 12.5% wide), so their lists merge and read alike (probes/histogram.py).
 *
 * Threads these loops start set their own affinity, say "ready" on a latch, wait for the go, work,
 * say "done", and then wait to be released before they exit: between done and release Python reads
 * their /proc/self/task/TID counters (migrations, context switches: app/parse/task_stat.py), which
 * vanish with the thread. perf_event_open cannot give these to a user: with perf_event_paranoid 2
 * (Debian's default) a software event must exclude the kernel, and migrations and switches happen
 * in the kernel, so they count 0 (measured on this VM).
 */
#ifndef COREMAP_LOOPS_H
#define COREMAP_LOOPS_H

#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE
#include <Python.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static inline uint64_t lp_tsc(void) { return __rdtsc(); }
static inline void lp_relax(void) { _mm_pause(); }
#define LP_HAVE_TSC 1
#else
static inline uint64_t lp_tsc(void) { return 0; }
static inline void lp_relax(void) { }
#define LP_HAVE_TSC 0
#endif

static inline uint64_t lp_timespec_ns(const struct timespec *ts)
{
    return (uint64_t)ts->tv_sec * 1000000000ull + (uint64_t)ts->tv_nsec;
}

static inline uint64_t lp_clock_ns(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return lp_timespec_ns(&ts);
}

static inline uint64_t lp_mono_ns(void) { return lp_clock_ns(CLOCK_MONOTONIC); }

/* Defined once, in _native.c: the TSC's rate (measured once per process, ~10 ms the first time),
 * whether the kernel says it is invariant (constant_tsc and nonstop_tsc), pinning the calling thread
 * to one CPU, and touching 64 KiB of stack before a timed loop. Hidden: shared by the files of this
 * one extension, not exported from it. */
__attribute__((visibility("hidden"))) double lp_tsc_hz(void);
__attribute__((visibility("hidden"))) void lp_prefault_stack(void);
__attribute__((visibility("hidden"))) int lp_tsc_invariant(void);
__attribute__((visibility("hidden"))) int lp_pin_self(int cpu);

/* The largest gaps or latest wakeups a chunk keeps, and the gap lengths jitter users read
 * (MicroJitterSampler's and oslat's: 2, 10, 100 us, 1 ms), counted exactly by the jitter and wakeup
 * loops alike; probes/histogram.py GAP_STEPS_NS names the same four. */
#define LP_MAX_TOP 64
struct lp_gap {
    uint64_t at, len; /* when the gap ended (absolute) or the wakeup was due, how long */
};
#define LP_NSTEP 4
static const uint64_t LP_STEP_NS[LP_NSTEP] = {2000, 10000, 100000, 1000000};

/* Keep (at, len) among the top_n longest seen (top holds *ntop of them). */
static inline void lp_keep_top(struct lp_gap *top, int *ntop, int top_n, uint64_t at, uint64_t len)
{
    int m = 0;
    if (*ntop < top_n)
        m = (*ntop)++;
    else if (top_n == 0)
        return;
    else {
        for (int i = 1; i < *ntop; i++)
            if (top[i].len < top[m].len)
                m = i;
        if (len <= top[m].len)
            return;
    }
    top[m].at = at;
    top[m].len = len;
}

/* [[step_ns, how many reached it, ns spent in them], ...] for the LP_STEP_NS steps counted (a NULL
 * `counted`: all), `lost` in units of `scale` ns. */
static inline PyObject *lp_steps_list(const uint64_t *at_least, const uint64_t *lost, double scale,
                                      const int *counted)
{
    PyObject *steps = PyList_New(0);
    for (int k = 0; steps && k < LP_NSTEP; k++) {
        if (counted && !counted[k])
            continue;
        PyObject *row = Py_BuildValue("[KKK]", (unsigned long long)LP_STEP_NS[k], (unsigned long long)at_least[k],
                                      (unsigned long long)(lost[k] * scale));
        if (!row || PyList_Append(steps, row) < 0)
            Py_CLEAR(steps);
        Py_XDECREF(row);
    }
    return steps;
}

/* ---------------------------------------------------------------- clock */

struct lp_clock {
    int tsc;            /* 1: ticks are TSC ticks; 0: ticks are CLOCK_MONOTONIC ns */
    double ns_per_tick;
};

static inline void lp_clock_init(struct lp_clock *c, double tsc_hz)
{
    c->tsc = LP_HAVE_TSC && tsc_hz > 0;
    c->ns_per_tick = c->tsc ? 1e9 / tsc_hz : 1.0;
}

static inline uint64_t lp_now(const struct lp_clock *c)
{
    return c->tsc ? lp_tsc() : lp_mono_ns();
}

static inline double lp_ns(const struct lp_clock *c, uint64_t ticks)
{
    return (double)ticks * c->ns_per_tick;
}

/* ---------------------------------------------------------------- buckets */

#define LP_SUB_BITS 3
#define LP_SUB_COUNT (1 << LP_SUB_BITS)
#define LP_NBUCKETS (64 * LP_SUB_COUNT)

static inline unsigned lp_bucket(uint64_t v)
{
    if (v < LP_SUB_COUNT)
        return (unsigned)v;
    unsigned e = 63u - (unsigned)__builtin_clzll(v);
    unsigned sub = (unsigned)(v >> (e - LP_SUB_BITS)) & (LP_SUB_COUNT - 1);
    return (e - LP_SUB_BITS + 1) * LP_SUB_COUNT + sub;
}

static inline void lp_bucket_bounds(unsigned i, uint64_t *lo, uint64_t *hi)
{
    if (i < LP_SUB_COUNT) {
        *lo = i;
        *hi = i + 1;
        return;
    }
    unsigned e = i / LP_SUB_COUNT + LP_SUB_BITS - 1;
    unsigned sub = i % LP_SUB_COUNT;
    *lo = (uint64_t)(LP_SUB_COUNT + sub) << (e - LP_SUB_BITS);
    *hi = (uint64_t)(LP_SUB_COUNT + sub + 1) << (e - LP_SUB_BITS);
}

/* Sparse [[lo_ns, hi_ns, count], ...]; `scale` converts recorded units (ticks) to ns. */
static inline PyObject *lp_buckets_list(const uint64_t *counts, double scale)
{
    PyObject *out = PyList_New(0);
    for (unsigned i = 0; out && i < LP_NBUCKETS; i++) {
        if (!counts[i])
            continue;
        uint64_t lo, hi;
        lp_bucket_bounds(i, &lo, &hi);
        unsigned long long lo_ns = (unsigned long long)(lo * scale + 0.5);
        unsigned long long hi_ns = (unsigned long long)(hi * scale + 0.5);
        if (hi_ns <= lo_ns)
            hi_ns = lo_ns + 1;
        PyObject *row = Py_BuildValue("[KKK]", lo_ns, hi_ns, (unsigned long long)counts[i]);
        if (!row || PyList_Append(out, row) < 0) {
            Py_XDECREF(row);
            Py_CLEAR(out);
            break;
        }
        Py_DECREF(row);
    }
    return out;
}

/* ---------------------------------------------------------------- CPU sets */

/* None -> *given = 0 (the thread keeps the mask it inherits); a sequence of CPU ids -> that set. */
static inline int lp_cpuset(PyObject *obj, cpu_set_t *set, int *given)
{
    CPU_ZERO(set);
    *given = 0;
    if (obj == Py_None)
        return 0;
    PyObject *seq = PySequence_Fast(obj, "CPUs must be a list of CPU ids or None");
    if (!seq)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        long c = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (c == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        if (c < 0 || c >= CPU_SETSIZE) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_ValueError, "CPU %ld is out of range", c);
            return -1;
        }
        CPU_SET((int)c, set);
    }
    Py_DECREF(seq);
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "an empty CPU list");
        return -1;
    }
    *given = 1;
    return 0;
}

static inline pid_t lp_gettid(void) { return (pid_t)syscall(SYS_gettid); }

/* ---------------------------------------------------------------- latch */

/* A count that threads raise and others wait on: "both threads ready", "N windows done". */
struct lp_latch {
    pthread_mutex_t m;
    pthread_cond_t c;
    long count;
};

static inline void lp_latch_init(struct lp_latch *l)
{
    pthread_mutex_init(&l->m, NULL);
    pthread_cond_init(&l->c, NULL);
    l->count = 0;
}

static inline void lp_latch_destroy(struct lp_latch *l)
{
    pthread_cond_destroy(&l->c);
    pthread_mutex_destroy(&l->m);
}

static inline void lp_latch_add(struct lp_latch *l, long n)
{
    pthread_mutex_lock(&l->m);
    l->count += n;
    pthread_cond_broadcast(&l->c);
    pthread_mutex_unlock(&l->m);
}

/* Wait until the count reaches `n`; returns the count. */
static inline long lp_latch_wait(struct lp_latch *l, long n)
{
    pthread_mutex_lock(&l->m);
    while (l->count < n)
        pthread_cond_wait(&l->c, &l->m);
    long v = l->count;
    pthread_mutex_unlock(&l->m);
    return v;
}

/* Spin a little, then give the CPU away: a waiter that shares its CPU with the thread it waits for
 * (the same-CPU placement, one CPU of a scaling run) must let it run, and on separate CPUs a yield
 * to an otherwise idle CPU returns at once. */
#define LP_SPINS_BEFORE_YIELD 256
static inline void lp_backoff(unsigned *spins)
{
    if (++*spins < LP_SPINS_BEFORE_YIELD) {
        lp_relax();
    } else {
        *spins = 0;
        sched_yield();
    }
}


/* ---------------------------------------------------------------- runs held by capsules */

/* A loop's run between its start and its release, which Python holds in a capsule. Each loop's run
 * struct begins with this head: `release` ends and joins its threads and frees what the run holds
 * (called once, without the GIL: the threads may be waiting to be let go); `what` names the run in
 * the error a released one gives. The capsule's destructor releases a run dropped early (an
 * exception, Cancel) and frees it. */
struct lp_run {
    const char *what;
    void (*release)(struct lp_run *);
    int released;
};

static inline void lp_release(struct lp_run *h)
{
    if (h->released)
        return;
    h->released = 1;
    Py_BEGIN_ALLOW_THREADS
    h->release(h);
    Py_END_ALLOW_THREADS
}

static inline void lp_capsule_free(PyObject *cap)
{
    struct lp_run *h = PyCapsule_GetPointer(cap, PyCapsule_GetName(cap));
    if (!h)
        return;
    lp_release(h);
    free(h);
}

/* The run in a new capsule called `name`; NULL, the run released and freed, when there is no memory. */
static inline PyObject *lp_capsule(struct lp_run *h, const char *name)
{
    PyObject *cap = PyCapsule_New(h, name, lp_capsule_free);
    if (!cap) {
        lp_release(h);
        free(h);
    }
    return cap;
}

/* The run a capsule called `name` holds; NULL with an exception for another object, or for a run
 * already released unless `released_too`. */
static inline struct lp_run *lp_run_of(PyObject *cap, const char *name, int released_too)
{
    struct lp_run *h = PyCapsule_GetPointer(cap, name);
    if (h && h->released && !released_too) {
        PyErr_Format(PyExc_ValueError, "this %s was released", h->what);
        return NULL;
    }
    return h;
}

/* What each loop's `*_release(run)` does: let the threads go and join them, now (again: nothing). */
static inline PyObject *lp_release_capsule(PyObject *cap, const char *name)
{
    struct lp_run *h = lp_run_of(cap, name, 1);
    if (!h)
        return NULL;
    lp_release(h);
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------- registering a loop file */

/* A loop file registers its functions with LP_METHODS(name, {"f", py_f, METH_..., "doc"}, ...) (the
 * entries of a PyMethodDef table, without the sentinel); PyInit__native (_native.c) adds every table
 * registered, so a new probe's loop needs no line there. The pointers go to the section coremap_loops,
 * which the linker (GNU ld, gold, lld) brackets with the symbols __start_coremap_loops and
 * __stop_coremap_loops, its name being a C identifier; `used` keeps the compiler from dropping a
 * pointer nothing in its own file reads. */
#define LP_METHODS(name, ...)                                                   \
    static PyMethodDef lp_table_##name[] = {__VA_ARGS__, {NULL, NULL, 0, NULL}}; \
    static PyMethodDef *lp_methods_##name __attribute__((used, section("coremap_loops"))) = lp_table_##name

#endif
