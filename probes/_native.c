/* probes._native: the timing loops behind coremap's probes.
 *
 * Every loop runs with the GIL released and returns a whole chunk's worth of results (sparse
 * bucket counts, a few top gaps), so Python never sits in a per-sample loop.
 *
 * Buckets (jitter and wakeup alike): values below 8 units get one bucket each; above, every power of
 * two is split into 8 equal sub-buckets (like HdrHistogram with 3 significant bits), so a bucket is
 * at most 12.5% wide. The jitter loop counts in TSC ticks and converts bucket edges to ns at the end
 * of a chunk; the wakeup loop counts in ns.
 *
 * rdtsc is used only where the kernel says the TSC runs at a constant rate in every C-state
 * (cpuinfo flags constant_tsc + nonstop_tsc, see arch/x86/include/asm/cpufeatures.h); elsewhere the
 * loops read CLOCK_MONOTONIC, which costs more per sample but is always right.
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/perf_event.h>

#include "_loops.h"       /* lp_tsc, the log buckets: one scheme for every probe's histogram */

#define HAVE_RDTSC LP_HAVE_TSC
#define MAX_TOP 64

static inline uint64_t mono_ns(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------- tsc_info */

static int cpuinfo_has_invariant_tsc(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return 0;
    char line[8192];
    int constant = 0, nonstop = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5) != 0)
            continue;
        constant = strstr(line, " constant_tsc") != NULL;
        nonstop = strstr(line, " nonstop_tsc") != NULL;
        break; /* the first CPU's flags; the kernel clears these system-wide when any CPU lacks them */
    }
    fclose(f);
    return constant && nonstop;
}

static double g_tsc_hz = 0.0;

static double calibrate_tsc(void)
{
    /* Two reads of each clock bracketing a ~60 ms busy wait; CLOCK_MONOTONIC_RAW is not slewed
     * by NTP, so the rate is the hardware's. */
    uint64_t t0 = lp_tsc(), n0 = mono_ns(CLOCK_MONOTONIC_RAW);
    uint64_t n1;
    do {
        n1 = mono_ns(CLOCK_MONOTONIC_RAW);
    } while (n1 - n0 < 60000000ull);
    uint64_t t1 = lp_tsc();
    return (double)(t1 - t0) * 1e9 / (double)(n1 - n0);
}

static PyObject *py_tsc_info(PyObject *self, PyObject *args)
{
    int usable = HAVE_RDTSC && cpuinfo_has_invariant_tsc();
    double hz = 0, rdtsc_ns = 0, cgt_ns = 0;
    Py_BEGIN_ALLOW_THREADS
    if (usable) {
        if (g_tsc_hz == 0.0)
            g_tsc_hz = calibrate_tsc();
        hz = g_tsc_hz;
        const int n = 1000000;
        volatile uint64_t sink = 0;
        uint64_t a = lp_tsc();
        for (int i = 0; i < n; i++)
            sink += lp_tsc();
        uint64_t b = lp_tsc();
        rdtsc_ns = (double)(b - a) / n * 1e9 / hz;
        (void)sink;
    }
    {
        const int n = 200000;
        volatile uint64_t sink = 0;
        uint64_t a = mono_ns(CLOCK_MONOTONIC);
        for (int i = 0; i < n; i++)
            sink += mono_ns(CLOCK_MONOTONIC);
        uint64_t b = mono_ns(CLOCK_MONOTONIC);
        cgt_ns = (double)(b - a) / n;
        (void)sink;
    }
    Py_END_ALLOW_THREADS
    return Py_BuildValue("{s:O,s:d,s:d,s:d}", "usable", usable ? Py_True : Py_False, "hz", hz,
                         "rdtsc_ns", rdtsc_ns, "clock_gettime_ns", cgt_ns);
}

/* ---------------------------------------------------------------- memory */

/* Touch 64 KiB of stack below the caller, so the loops never fault in a new stack page (the
 * kernel grows the stack on demand; cyclictest does the same before its measuring loop). */
static __attribute__((noinline)) void prefault_stack(void)
{
    volatile unsigned char buf[64 * 1024];
    for (size_t i = 0; i < sizeof buf; i += 4096)
        buf[i] = 0;
}

static PyObject *py_lock_memory(PyObject *self, PyObject *args)
{
    /* mlockall(MCL_CURRENT | MCL_FUTURE), as oslat and cyclictest do before measuring: every page
     * mapped now or later stays resident and is faulted in at map time, so neither a page fault
     * nor reclaim shows up as a gap. Fails with ENOMEM/EPERM past RLIMIT_MEMLOCK without
     * CAP_IPC_LOCK (mlock(2)); the caller decides whether that is fatal. */
    if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    prefault_stack();
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------- jitter */

struct gap {
    uint64_t at, len; /* in ticks: when the gap ended (absolute), how long */
};

#define NEDGE 11
/* The gap lengths jitter users read (MicroJitterSampler's and oslat's: 2, 10, 100 us, 1 ms), counted
 * exactly; probes/histogram.py GAP_STEPS_NS names the same four. */
#define NSTEP 4
static const uint64_t STEP_NS[NSTEP] = {2000, 10000, 100000, 1000000};

struct jitter_state {
    uint64_t counts[LP_NBUCKETS]; /* gaps >= thr, fine log buckets, in ticks */
    uint64_t edge[NEDGE];      /* octave edges below thr, in ticks (clamped to thr) */
    uint64_t cum[NEDGE];       /* how many gaps were >= edge[k] */
    uint64_t step[NSTEP];      /* STEP_NS in ticks */
    uint64_t at_least[NSTEP];  /* gaps >= step[k], when step[k] >= thr (else counted above, coarsely) */
    uint64_t lost[NSTEP];      /* ticks spent in those gaps */
    struct gap top[MAX_TOP];
    int ntop, top_n;
    uint64_t thr;        /* ticks */
    uint64_t sampled;    /* ticks spent sampling */
    uint64_t iterations;
};

static inline void keep_top(struct jitter_state *s, uint64_t at, uint64_t len)
{
    if (s->top_n == 0)
        return;
    if (s->ntop < s->top_n) {
        s->top[s->ntop].at = at;
        s->top[s->ntop].len = len;
        s->ntop++;
        return;
    }
    int m = 0;
    for (int i = 1; i < s->ntop; i++)
        if (s->top[i].len < s->top[m].len)
            m = i;
    if (len > s->top[m].len) {
        s->top[m].at = at;
        s->top[m].len = len;
    }
}

/* One busy stretch of `span` ticks. `use_tsc` is a constant at each call site, so the compiler
 * emits a loop without the branch.
 *
 * Why the gaps below the threshold are counted in 11 register counters (cumulative "d >= edge")
 * instead of the bucket array: any store in this loop costs ~10 cycles per iteration next to a
 * ~22-cycle rdtsc (measured on a KVM guest), while compare-and-add on registers is free, and the
 * loop period is what bounds the shortest gap the probe can see. Above the threshold every gap
 * goes into the fine log buckets. */
static inline __attribute__((always_inline)) void
jitter_span(struct jitter_state *s, uint64_t span, int use_tsc)
{
    uint64_t prev = use_tsc ? lp_tsc() : mono_ns(CLOCK_MONOTONIC);
    const uint64_t start = prev, end = prev + span, thr = s->thr;
    const uint64_t e0 = s->edge[0], e1 = s->edge[1], e2 = s->edge[2], e3 = s->edge[3], e4 = s->edge[4],
                   e5 = s->edge[5], e6 = s->edge[6], e7 = s->edge[7], e8 = s->edge[8], e9 = s->edge[9],
                   e10 = s->edge[10];
    uint64_t c0 = 0, c1 = 0, c2 = 0, c3 = 0, c4 = 0, c5 = 0, c6 = 0, c7 = 0, c8 = 0, c9 = 0, c10 = 0;
    uint64_t n = 0;
    for (;;) {
        uint64_t now = use_tsc ? lp_tsc() : mono_ns(CLOCK_MONOTONIC);
        uint64_t d = now - prev;
        prev = now;
        n++;
        c0 += d >= e0; c1 += d >= e1; c2 += d >= e2; c3 += d >= e3; c4 += d >= e4; c5 += d >= e5;
        c6 += d >= e6; c7 += d >= e7; c8 += d >= e8; c9 += d >= e9; c10 += d >= e10;
        if (__builtin_expect(d >= thr, 0)) {
            /* rare (a gap): the exact step counts cost nothing in the loop's common path */
            s->counts[lp_bucket(d)]++;
            for (int k = 0; k < NSTEP; k++) {
                int hit = d >= s->step[k];
                s->at_least[k] += hit;
                s->lost[k] += hit ? d : 0;
            }
            keep_top(s, now, d);
        }
        if (__builtin_expect(now >= end, 0))
            break;
    }
    s->cum[0] += c0; s->cum[1] += c1; s->cum[2] += c2; s->cum[3] += c3; s->cum[4] += c4;
    s->cum[5] += c5; s->cum[6] += c6; s->cum[7] += c7; s->cum[8] += c8; s->cum[9] += c9;
    s->cum[10] += c10;
    s->iterations += n;
    s->sampled += prev - start;
}

static int append_bucket(PyObject *list, unsigned long long lo, unsigned long long hi, unsigned long long n)
{
    PyObject *row = Py_BuildValue("[KKK]", lo, hi, n);
    if (!row)
        return -1;
    int r = PyList_Append(list, row);
    Py_DECREF(row);
    return r;
}

static PyObject *py_jitter_chunk(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"chunk_ns", "threshold_ns", "on_ns", "off_ns", "top_n", "use_tsc", NULL};
    unsigned long long chunk_ns, thr_ns, on_ns, off_ns;
    int top_n = 16, use_tsc = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "KKKK|ip", kwlist, &chunk_ns, &thr_ns, &on_ns, &off_ns,
                                     &top_n, &use_tsc))
        return NULL;
    if (top_n < 0 || top_n > MAX_TOP) {
        PyErr_Format(PyExc_ValueError, "top_n must be 0..%d", MAX_TOP);
        return NULL;
    }
    if (use_tsc && !(HAVE_RDTSC && cpuinfo_has_invariant_tsc()))
        use_tsc = 0;
    if (use_tsc && g_tsc_hz == 0.0) {
        Py_BEGIN_ALLOW_THREADS
        g_tsc_hz = calibrate_tsc();
        Py_END_ALLOW_THREADS
    }
    double hz = use_tsc ? g_tsc_hz : 1e9;
    double tick_ns = 1e9 / hz;
    struct jitter_state *s = calloc(1, sizeof *s);
    if (!s)
        return PyErr_NoMemory();
    /* Prefault, as oslat does by mlockall + memset of its buffers: calloc may hand back fresh,
     * untouched pages, and the first gap that lands in a new page of `counts` would take a page
     * fault inside the timed loop and be counted as a gap of its own. */
    memset(s, 0, sizeof *s);
    prefault_stack();
    s->top_n = top_n;
    s->thr = (uint64_t)(thr_ns / tick_ns);
    if (s->thr == 0)
        s->thr = 1;
    /* octave edges 8, 16, ... 8192 ns below the threshold, as ticks */
    uint64_t edge_ns[NEDGE];
    for (int k = 0; k < NEDGE; k++) {
        edge_ns[k] = 8ull << k;
        if (edge_ns[k] > thr_ns)
            edge_ns[k] = thr_ns;
        uint64_t t = (uint64_t)(edge_ns[k] / tick_ns + 0.999999);
        s->edge[k] = t < s->thr ? t : s->thr;
    }
    /* a step below the threshold can never be reached in the gap branch: UINT64_MAX marks it
     * uncounted, and the caller estimates it from the coarse buckets */
    for (int k = 0; k < NSTEP; k++) {
        uint64_t t = (uint64_t)(STEP_NS[k] / tick_ns + 0.999999);
        s->step[k] = STEP_NS[k] >= thr_ns ? (t > s->thr ? t : s->thr) : UINT64_MAX;
    }
    uint64_t mono0, tsc0 = 0, wall_ns;
    Py_BEGIN_ALLOW_THREADS
    mono0 = mono_ns(CLOCK_MONOTONIC);
    if (use_tsc)
        tsc0 = lp_tsc();
    uint64_t chunk_end = mono0 + chunk_ns;
    for (;;) {
        uint64_t now = mono_ns(CLOCK_MONOTONIC);
        if (now >= chunk_end)
            break;
        uint64_t on = on_ns == 0 ? chunk_end - now : on_ns;
        if (now + on > chunk_end)
            on = chunk_end - now;
        uint64_t span = (uint64_t)(on / tick_ns);
        if (use_tsc)
            jitter_span(s, span, 1);
        else
            jitter_span(s, span, 0);
        if (off_ns) {
            struct timespec ts = {(time_t)(off_ns / 1000000000ull), (long)(off_ns % 1000000000ull)};
            clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
        }
    }
    wall_ns = mono_ns(CLOCK_MONOTONIC) - mono0;
    Py_END_ALLOW_THREADS

    uint64_t above = 0;
    for (unsigned i = 0; i < LP_NBUCKETS; i++)
        above += s->counts[i];
    PyObject *buckets = PyList_New(0);
    PyObject *top = PyList_New(0);
    if (!buckets || !top)
        goto fail;
    {
        /* below the first edge, then octave by octave up to the threshold; cum[k] counts d >= edge[k] */
        uint64_t prev_cum = s->iterations, prev_ns = 0;
        for (int k = 0; k <= NEDGE; k++) {
            uint64_t cum = k < NEDGE ? s->cum[k] : above;
            uint64_t hi_ns = k < NEDGE ? edge_ns[k] : thr_ns;
            uint64_t c = prev_cum - cum;
            if (c && hi_ns > prev_ns && append_bucket(buckets, prev_ns, hi_ns, c) < 0)
                goto fail;
            if (hi_ns > prev_ns)
                prev_ns = hi_ns;
            prev_cum = cum;
        }
        PyObject *fine = lp_buckets_list(s->counts, tick_ns);
        if (!fine)
            goto fail;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(fine); i++) {
            PyObject *row = PyList_GET_ITEM(fine, i);
            /* the first fine bucket may start below the threshold's exact ns value after rounding */
            unsigned long long lo = PyLong_AsUnsignedLongLong(PyList_GET_ITEM(row, 0));
            unsigned long long hi = PyLong_AsUnsignedLongLong(PyList_GET_ITEM(row, 1));
            if (lo < thr_ns) {
                PyList_SetItem(row, 0, PyLong_FromUnsignedLongLong(thr_ns));
                if (hi <= thr_ns)
                    PyList_SetItem(row, 1, PyLong_FromUnsignedLongLong(thr_ns + 1));
            }
            if (PyList_Append(buckets, row) < 0) {
                Py_DECREF(fine);
                goto fail;
            }
        }
        Py_DECREF(fine);
    }
    for (int i = 0; i < s->ntop; i++) {
        /* gap start as CLOCK_MONOTONIC ns, so the caller can line gaps up with other clocks */
        uint64_t end_ns = use_tsc ? mono0 + (uint64_t)((double)(s->top[i].at - tsc0) * tick_ns) : s->top[i].at;
        uint64_t len_ns = (uint64_t)(s->top[i].len * tick_ns);
        PyObject *row = Py_BuildValue("[KK]", (unsigned long long)(end_ns - len_ns), (unsigned long long)len_ns);
        if (!row || PyList_Append(top, row) < 0) {
            Py_XDECREF(row);
            goto fail;
        }
        Py_DECREF(row);
    }
    /* [[step_ns, gaps >= it, ns lost in them], ...] for the steps at or above the threshold */
    PyObject *steps = PyList_New(0);
    for (int k = 0; steps && k < NSTEP; k++) {
        if (s->step[k] == UINT64_MAX)
            continue;
        PyObject *row = Py_BuildValue("[KKK]", (unsigned long long)STEP_NS[k], (unsigned long long)s->at_least[k],
                                      (unsigned long long)(s->lost[k] * tick_ns));
        if (!row || PyList_Append(steps, row) < 0)
            Py_CLEAR(steps);
        Py_XDECREF(row);
    }
    if (!steps)
        goto fail;
    double sampled_ns = s->sampled * tick_ns;
    double loop_ns = s->iterations ? sampled_ns / (double)s->iterations : 0.0;
    PyObject *res = Py_BuildValue("{s:K,s:K,s:K,s:d,s:N,s:N,s:N,s:O,s:d,s:K}",
                                  "elapsed_ns", (unsigned long long)wall_ns,
                                  "sampled_ns", (unsigned long long)sampled_ns,
                                  "iterations", (unsigned long long)s->iterations,
                                  "loop_ns", loop_ns, "buckets", buckets, "top_gaps", top, "at_least", steps,
                                  "tsc", use_tsc ? Py_True : Py_False, "tsc_hz", hz,
                                  "start_ns", (unsigned long long)mono0);
    free(s);
    return res;
fail:
    Py_XDECREF(buckets);
    Py_XDECREF(top);
    free(s);
    return NULL;
}

/* ---------------------------------------------------------------- wakeup */

/* The latest wakeups of a chunk, kept as cyclictest's histogram cannot keep them: each with the
 * time it was due, so the caller can say what ran on the CPU between due and woken (timerlat -a). */
static void keep_late(struct gap *top, int *ntop, int top_n, uint64_t due, uint64_t lat)
{
    if (top_n == 0)
        return;
    if (*ntop < top_n) {
        top[*ntop].at = due;
        top[*ntop].len = lat;
        (*ntop)++;
        return;
    }
    int m = 0;
    for (int i = 1; i < *ntop; i++)
        if (top[i].len < top[m].len)
            m = i;
    if (lat > top[m].len) {
        top[m].at = due;
        top[m].len = lat;
    }
}

static PyObject *py_wakeup_chunk(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"chunk_ns", "interval_ns", "top_n", NULL};
    unsigned long long chunk_ns, interval_ns;
    int top_n = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "KK|i", kwlist, &chunk_ns, &interval_ns, &top_n))
        return NULL;
    if (interval_ns < 1000) {
        PyErr_SetString(PyExc_ValueError, "interval must be at least 1 us");
        return NULL;
    }
    if (top_n < 0 || top_n > MAX_TOP) {
        PyErr_Format(PyExc_ValueError, "top_n must be 0..%d", MAX_TOP);
        return NULL;
    }
    uint64_t *counts = calloc(LP_NBUCKETS, sizeof *counts);
    if (!counts)
        return PyErr_NoMemory();
    struct gap top[MAX_TOP];
    int ntop = 0;
    uint64_t at_least[NSTEP] = {0}, lost[NSTEP] = {0};
    uint64_t n = 0, max = 0, min = UINT64_MAX, sum = 0, t0, wall;
    Py_BEGIN_ALLOW_THREADS
    t0 = mono_ns(CLOCK_MONOTONIC);
    uint64_t target = t0 + interval_ns, end = t0 + chunk_ns;
    while (target <= end) {
        struct timespec ts = {(time_t)(target / 1000000000ull), (long)(target % 1000000000ull)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
        uint64_t now = mono_ns(CLOCK_MONOTONIC);
        uint64_t lat = now > target ? now - target : 0;
        counts[lp_bucket(lat)]++;
        n++;
        sum += lat;
        if (lat > max)
            max = lat;
        if (lat < min)
            min = lat;
        /* the same exact steps as the jitter loop counts (STEP_NS), for the per-CPU figures */
        for (int k = 0; k < NSTEP; k++) {
            int hit = lat >= STEP_NS[k];
            at_least[k] += hit;
            lost[k] += hit ? lat : 0;
        }
        if (lat >= STEP_NS[0])
            keep_late(top, &ntop, top_n, target, lat);
        target += interval_ns;
        /* A wakeup later than a whole interval skips the missed periods, as cyclictest does
         * (its "-i" loop re-arms from the next period), rather than firing a burst. */
        while (target < now)
            target += interval_ns;
    }
    wall = mono_ns(CLOCK_MONOTONIC) - t0;
    Py_END_ALLOW_THREADS
    PyObject *buckets = lp_buckets_list(counts, 1.0);
    free(counts);
    PyObject *late = PyList_New(0), *steps = PyList_New(0);
    for (int i = 0; late && i < ntop; i++) {
        /* [due, latency]: CLOCK_MONOTONIC ns, as the jitter loop's [gap start, length] */
        PyObject *row = Py_BuildValue("[KK]", (unsigned long long)top[i].at, (unsigned long long)top[i].len);
        if (!row || PyList_Append(late, row) < 0)
            Py_CLEAR(late);
        Py_XDECREF(row);
    }
    for (int k = 0; steps && k < NSTEP; k++) {
        PyObject *row = Py_BuildValue("[KKK]", (unsigned long long)STEP_NS[k], (unsigned long long)at_least[k],
                                      (unsigned long long)lost[k]);
        if (!row || PyList_Append(steps, row) < 0)
            Py_CLEAR(steps);
        Py_XDECREF(row);
    }
    if (!buckets || !late || !steps) {
        Py_XDECREF(buckets);
        Py_XDECREF(late);
        Py_XDECREF(steps);
        return NULL;
    }
    return Py_BuildValue("{s:K,s:K,s:N,s:K,s:K,s:K,s:N,s:N}", "elapsed_ns", (unsigned long long)wall,
                         "wakeups", (unsigned long long)n, "buckets", buckets,
                         "min_ns", (unsigned long long)(n ? min : 0), "max_ns", (unsigned long long)max,
                         "sum_ns", (unsigned long long)sum, "late", late, "at_least", steps);
}

static PyObject *py_set_timer_slack(PyObject *self, PyObject *args)
{
    unsigned long long ns;
    if (!PyArg_ParseTuple(args, "K", &ns))
        return NULL;
    /* PR_SET_TIMERSLACK with 0 restores the default slack (Documentation/userspace-api/... prctl(2));
     * callers that want "as small as possible" pass 1. */
    if (prctl(PR_SET_TIMERSLACK, (unsigned long)ns, 0, 0, 0) != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

static PyObject *py_get_timer_slack(PyObject *self, PyObject *args)
{
    int r = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    if (r < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    return PyLong_FromLong(r);
}

/* ---------------------------------------------------------------- work unit */

static PyObject *py_work_unit(PyObject *self, PyObject *args)
{
    unsigned long long iters;
    if (!PyArg_ParseTuple(args, "K", &iters))
        return NULL;
    uint64_t t0, t1;
    uint32_t acc = 0;
    Py_BEGIN_ALLOW_THREADS
    /* 1 KiB table: stays in L1, so the time measures the core, not the memory system. */
    uint32_t table[256];
    for (int i = 0; i < 256; i++)
        table[i] = (uint32_t)i * 2654435761u;
    uint32_t x = 12345;
    t0 = mono_ns(CLOCK_MONOTONIC);
    for (uint64_t i = 0; i < iters; i++) {
        x = x * 1664525u + 1013904223u;
        uint32_t j = x >> 24;
        table[j] ^= x + (table[(j + 1) & 255] >> 3);
        acc += table[j];
    }
    t1 = mono_ns(CLOCK_MONOTONIC);
    Py_END_ALLOW_THREADS
    return Py_BuildValue("(KI)", (unsigned long long)(t1 - t0), (unsigned)acc);
}

/* ---------------------------------------------------------------- c2c */

/* The ping-pong line sits alone in a 128-byte aligned block (hardware prefetchers fetch lines in
 * 128-byte aligned pairs; folly's hardware_destructive_interference_size is 128 for this reason),
 * so nothing else the two threads touch shares its pair. The partner's parameters and `ready` sit
 * on the next line and are read only before the timed loop. */
struct c2c_shared {
    _Alignas(128) _Atomic uint64_t line;
    char pad[120];
    _Atomic int ready; /* the partner's verdict on pinning: 1 pinned, -1 failed (err holds errno) */
    int cpu_b;
    uint64_t trips;
    int err;
};

/* Both sides store with seq_cst (xchg on x86), as the textbook ping-pong and the benchmark's
 * reference do, so the probe times the same protocol as its peer. The spin loops are one load and
 * one compare, touching nothing but the line; errors are settled once, before the loop, through
 * `ready`. (The 37/48/58 ns spread first blamed on the loops came from the line's address; see
 * py_c2c.) */
#define C2C_STORE memory_order_seq_cst

static int pin_self(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set);
}

static void *c2c_partner(void *arg)
{
    struct c2c_shared *sh = arg;
    if (pin_self(sh->cpu_b) != 0) {
        sh->err = errno;
        atomic_store(&sh->ready, -1);
        return NULL;
    }
    const uint64_t trips = sh->trips;
    _Atomic uint64_t *line = &sh->line;
    atomic_store(&sh->ready, 1);
    for (uint64_t i = 0; i < trips; i++) {
        const uint64_t want = 2 * i + 1;
        while (atomic_load_explicit(line, memory_order_acquire) != want)
            ;
        atomic_store_explicit(line, want + 1, C2C_STORE);
    }
    return NULL;
}

static PyObject *py_c2c(PyObject *self, PyObject *args)
{
    int a, b, batches;
    unsigned long long trips;
    if (!PyArg_ParseTuple(args, "iiKi", &a, &b, &trips, &batches))
        return NULL;
    if (batches < 1 || trips < 1) {
        PyErr_SetString(PyExc_ValueError, "trips and batches must be positive");
        return NULL;
    }
    /* Each batch uses a line on its own page. On a VM (measured on an EPYC host) the one-way time
     * of one vCPU pair depended on the line's physical address - 37, 48 or 58 ns, fixed for an
     * address - as the address picks where the line's coherence is tracked. A pair's median over
     * batches on different pages is then its typical latency, not one address's. */
    const size_t page = 4096;
    double *rt = calloc((size_t)batches, sizeof *rt);
    /* fresh anonymous pages on every call (not the heap, which hands back the same block call after
     * call), populated now: no page fault inside a timed batch */
    const size_t arena_len = (size_t)batches * page;
    unsigned char *arena = mmap(NULL, arena_len, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (!rt || arena == MAP_FAILED) {
        free(rt);
        if (arena != MAP_FAILED)
            munmap(arena, arena_len);
        return PyErr_NoMemory();
    }
    int err = 0;
    cpu_set_t saved;
    sched_getaffinity(0, sizeof saved, &saved);
    Py_BEGIN_ALLOW_THREADS
    if (pin_self(a) != 0)
        err = errno;
    for (int k = 0; k < batches && !err; k++) {
        struct c2c_shared *sh = (struct c2c_shared *)(arena + (size_t)k * page);
        memset(sh, 0, sizeof *sh);
        sh->cpu_b = b;
        sh->trips = trips;
        pthread_t th;
        if ((err = pthread_create(&th, NULL, c2c_partner, sh)) != 0)
            break;
        int ready;
        while ((ready = atomic_load(&sh->ready)) == 0)
            ;
        if (ready < 0) {
            pthread_join(th, NULL);
            err = sh->err ? sh->err : EINVAL;
            break;
        }
        /* the first round trip is not timed: it waits for the partner to reach its loop */
        uint64_t t0 = 0;
        _Atomic uint64_t *line = &sh->line;
        for (uint64_t i = 0; i < trips; i++) {
            if (i == 1)
                t0 = mono_ns(CLOCK_MONOTONIC);
            atomic_store_explicit(line, 2 * i + 1, C2C_STORE);
            while (atomic_load_explicit(line, memory_order_acquire) != 2 * i + 2)
                ;
        }
        uint64_t t1 = mono_ns(CLOCK_MONOTONIC);
        pthread_join(th, NULL);
        if (!err)
            rt[k] = trips > 1 ? (double)(t1 - t0) / (double)(trips - 1) : 0.0;
    }
    sched_setaffinity(0, sizeof saved, &saved);
    Py_END_ALLOW_THREADS
    munmap(arena, arena_len);
    if (err) {
        free(rt);
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    PyObject *out = PyList_New(batches);
    for (int k = 0; out && k < batches; k++)
        PyList_SET_ITEM(out, k, PyFloat_FromDouble(rt[k]));
    free(rt);
    return out;
}

/* ---------------------------------------------------------------- counters */

struct ev {
    const char *name;
    uint32_t type;
    uint64_t config;
};

static const struct ev EVENTS[] = {
    {"context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
    {"cpu-migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS},
    {"page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
    {"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
    {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
};
#define NEV (sizeof EVENTS / sizeof EVENTS[0])

/* Frees the first n strings of argv and argv itself (strdup'ed copies of the command). */
static void free_argv(char **argv, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        free(argv[i]);
    free(argv);
}

static void close_pair(int p[2])
{
    close(p[0]);
    close(p[1]);
}

static PyObject *py_count_command(PyObject *self, PyObject *args)
{
    PyObject *argv_obj;
    int cpu = -1, stdout_fd = -1;
    if (!PyArg_ParseTuple(args, "O!|ii", &PyList_Type, &argv_obj, &cpu, &stdout_fd))
        return NULL;
    Py_ssize_t argc = PyList_GET_SIZE(argv_obj);
    if (argc < 1) {
        PyErr_SetString(PyExc_ValueError, "empty command");
        return NULL;
    }
    char **argv = calloc((size_t)argc + 1, sizeof *argv);
    if (!argv)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < argc; i++) {
        const char *s = PyUnicode_AsUTF8(PyList_GET_ITEM(argv_obj, i));
        if (!s) {
            free_argv(argv, i);
            return NULL;
        }
        /* A copy the child can exec after the GIL is released (the list may change meanwhile). */
        argv[i] = strdup(s);
        if (!argv[i]) {
            free_argv(argv, i);
            return PyErr_NoMemory();
        }
    }
    int go[2], fail[2];
    if (pipe2(go, O_CLOEXEC) != 0) {
        free_argv(argv, argc);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    if (pipe2(fail, O_CLOEXEC) != 0) {
        int e = errno;
        close_pair(go);
        free_argv(argv, argc);
        errno = e;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    int fds[NEV], errs[NEV];
    uint64_t vals[NEV][3];
    int status = 0, exec_errno = 0, fork_errno = 0;
    uint64_t wall0 = 0, wall1 = 0;
    pid_t pid;
    pid_t parent = getpid();
    Py_BEGIN_ALLOW_THREADS
    pid = fork();
    if (pid < 0) {
        fork_errno = errno;
        close_pair(go);
        close_pair(fail);
    }
    if (pid == 0) {
        char c;
        /* The counted command goes when the probe goes (killed with its parent, or cancelled):
           no child outlives its parent. exec keeps the death signal (prctl(2)). */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        close(go[1]);
        close(fail[0]);
        if (cpu >= 0 && pin_self(cpu) != 0) {
            int e = errno;
            (void)!write(fail[1], &e, sizeof e);
            _exit(127);
        }
        if (read(go[0], &c, 1) != 1)
            _exit(127);
        if (stdout_fd >= 0 && dup2(stdout_fd, 1) < 0)
            _exit(127);
        execvp(argv[0], argv);
        int e = errno;
        (void)!write(fail[1], &e, sizeof e);
        _exit(127);
    }
    if (pid > 0) {
        close(go[0]);
        close(fail[1]);
        for (size_t i = 0; i < NEV; i++) {
            struct perf_event_attr at;
            memset(&at, 0, sizeof at);
            at.size = sizeof at;
            at.type = EVENTS[i].type;
            at.config = EVENTS[i].config;
            at.disabled = 1;
            at.inherit = 1;
            at.enable_on_exec = 1;
            at.exclude_hv = 1;
            at.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
            fds[i] = (int)syscall(SYS_perf_event_open, &at, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
            errs[i] = fds[i] < 0 ? errno : 0;
        }
        wall0 = mono_ns(CLOCK_MONOTONIC);
        (void)!write(go[1], "g", 1);
        close(go[1]);
        ssize_t r = read(fail[0], &exec_errno, sizeof exec_errno);
        if (r != (ssize_t)sizeof exec_errno)
            exec_errno = 0; /* EOF: exec succeeded and closed the CLOEXEC pipe */
        close(fail[0]);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        wall1 = mono_ns(CLOCK_MONOTONIC);
        for (size_t i = 0; i < NEV; i++) {
            if (fds[i] < 0)
                continue;
            if (read(fds[i], vals[i], sizeof vals[i]) != (ssize_t)sizeof vals[i])
                errs[i] = errno ? errno : EIO;
            close(fds[i]);
        }
    }
    Py_END_ALLOW_THREADS
    free_argv(argv, argc);
    if (pid < 0) {
        errno = fork_errno;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    if (exec_errno) {
        errno = exec_errno;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    PyObject *counts = PyDict_New();
    PyObject *why = PyDict_New();
    for (size_t i = 0; i < NEV; i++) {
        PyObject *v;
        if (errs[i]) {
            v = Py_None;
            Py_INCREF(v);
            PyObject *msg = PyUnicode_FromString(strerror(errs[i]));
            PyDict_SetItemString(why, EVENTS[i].name, msg);
            Py_DECREF(msg);
        } else {
            uint64_t raw = vals[i][0], en = vals[i][1], run = vals[i][2];
            /* Multiplexed hardware counters ran only part of the time: scale as perf stat does. */
            double scaled = run && run < en ? (double)raw * (double)en / (double)run : (double)raw;
            v = (run == 0 && en > 0) ? (Py_INCREF(Py_None), Py_None) : PyLong_FromUnsignedLongLong((unsigned long long)(scaled + 0.5));
            if (v == Py_None) {
                PyObject *msg = PyUnicode_FromString("counter never ran (PMU busy or not exposed)");
                PyDict_SetItemString(why, EVENTS[i].name, msg);
                Py_DECREF(msg);
            }
        }
        PyDict_SetItemString(counts, EVENTS[i].name, v);
        Py_DECREF(v);
    }
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    return Py_BuildValue("{s:N,s:N,s:i,s:K}", "counts", counts, "unavailable", why, "exit_status", code,
                         "wall_ns", (unsigned long long)(wall1 - wall0));
}

/* ---------------------------------------------------------------- module */

static PyMethodDef methods[] = {
    {"tsc_info", py_tsc_info, METH_NOARGS,
     "tsc_info() -> {usable, hz, rdtsc_ns, clock_gettime_ns}: invariant TSC?, its measured rate, "
     "cost of one rdtsc and one clock_gettime(CLOCK_MONOTONIC)."},
    {"jitter_chunk", (PyCFunction)(void (*)(void))py_jitter_chunk, METH_VARARGS | METH_KEYWORDS,
     "jitter_chunk(chunk_ns, threshold_ns, on_ns, off_ns, top_n=16, use_tsc=True) -> dict: busy-read "
     "the clock for chunk_ns (on_ns sampling / off_ns asleep; on_ns=0 means always on); every gap "
     "goes into log buckets, gaps >= threshold_ns compete for the top_n list; at_least: [[step_ns, gaps, "
     "ns lost]] counted exactly for the steps 2, 10, 100 us and 1 ms at or above threshold_ns."},
    {"wakeup_chunk", (PyCFunction)(void (*)(void))py_wakeup_chunk, METH_VARARGS | METH_KEYWORDS,
     "wakeup_chunk(chunk_ns, interval_ns, top_n=0) -> dict: clock_nanosleep(TIMER_ABSTIME) every interval; "
     "latency = wake - target in log buckets; late: the top_n latest of at least 2 us as [due_ns, latency_ns]; "
     "at_least: [[step_ns, wakeups >= it, ns late in them], ...]."},
    {"lock_memory", py_lock_memory, METH_NOARGS,
     "lock_memory(): mlockall(MCL_CURRENT | MCL_FUTURE) and prefault 64 KiB of stack; OSError if refused."},
    {"set_timer_slack", py_set_timer_slack, METH_VARARGS, "prctl(PR_SET_TIMERSLACK, ns)"},
    {"get_timer_slack", py_get_timer_slack, METH_NOARGS, "prctl(PR_GET_TIMERSLACK)"},
    {"work_unit", py_work_unit, METH_VARARGS,
     "work_unit(iterations) -> (ns, checksum): an L1-resident LCG/hash loop."},
    {"c2c", py_c2c, METH_VARARGS,
     "c2c(cpu_a, cpu_b, round_trips, batches) -> [ns per round trip per batch]: one cache line "
     "passed back and forth between a thread on cpu_a and one on cpu_b."},
    {"count_command", py_count_command, METH_VARARGS,
     "count_command(argv, cpu=-1, stdout_fd=-1) -> {counts, unavailable, exit_status, wall_ns}: run argv "
     "(pinned to cpu when >= 0; its stdout sent to stdout_fd when >= 0) under perf_event_open counters (inherit, enable_on_exec)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "probes._native", NULL, -1, methods};

/* the method table of every loop file compiled in beside this one (LP_METHODS, _loops.h) */
extern PyMethodDef *__start_coremap_loops[], *__stop_coremap_loops[];

PyMODINIT_FUNC PyInit__native(void)
{
    PyObject *m = PyModule_Create(&moddef);
    if (!m)
        return NULL;
    for (PyMethodDef **table = __start_coremap_loops; table < __stop_coremap_loops; table++)
        if (PyModule_AddFunctions(m, *table) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    PyModule_AddIntConstant(m, "SUB_BUCKETS", LP_SUB_COUNT);
    return m;
}
