/* The jitter probe's loop (probes/jitter/): a busy loop reading the clock, every gap between two reads
 * into log buckets (_loops.h's scheme), the largest kept.
 *
 * rdtsc is used only where the kernel says the TSC runs at a constant rate in every C-state
 * (cpuinfo flags constant_tsc + nonstop_tsc, see arch/x86/include/asm/cpufeatures.h); elsewhere the
 * loop reads CLOCK_MONOTONIC, which costs more per sample but is always right. It counts in TSC ticks
 * and converts bucket edges to ns at the end of a chunk.
 */
#include "../_loops.h"

#define NEDGE 11

struct jitter_state {
    uint64_t counts[LP_NBUCKETS]; /* gaps >= thr, fine log buckets, in ticks */
    uint64_t edge[NEDGE];      /* octave edges below thr, in ticks (clamped to thr) */
    uint64_t cum[NEDGE];       /* how many gaps were >= edge[k] */
    uint64_t step[LP_NSTEP];      /* LP_STEP_NS in ticks */
    uint64_t at_least[LP_NSTEP];  /* gaps >= step[k], when step[k] >= thr (else counted above, coarsely) */
    uint64_t lost[LP_NSTEP];      /* ticks spent in those gaps */
    struct lp_gap top[LP_MAX_TOP];
    int ntop, top_n;
    uint64_t thr;        /* ticks */
    uint64_t sampled;    /* ticks spent sampling */
    uint64_t iterations;
};

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
    uint64_t prev = use_tsc ? lp_tsc() : lp_mono_ns();
    const uint64_t start = prev, end = prev + span, thr = s->thr;
    const uint64_t e0 = s->edge[0], e1 = s->edge[1], e2 = s->edge[2], e3 = s->edge[3], e4 = s->edge[4],
                   e5 = s->edge[5], e6 = s->edge[6], e7 = s->edge[7], e8 = s->edge[8], e9 = s->edge[9],
                   e10 = s->edge[10];
    uint64_t c0 = 0, c1 = 0, c2 = 0, c3 = 0, c4 = 0, c5 = 0, c6 = 0, c7 = 0, c8 = 0, c9 = 0, c10 = 0;
    uint64_t n = 0;
    for (;;) {
        uint64_t now = use_tsc ? lp_tsc() : lp_mono_ns();
        uint64_t d = now - prev;
        prev = now;
        n++;
        c0 += d >= e0; c1 += d >= e1; c2 += d >= e2; c3 += d >= e3; c4 += d >= e4; c5 += d >= e5;
        c6 += d >= e6; c7 += d >= e7; c8 += d >= e8; c9 += d >= e9; c10 += d >= e10;
        if (__builtin_expect(d >= thr, 0)) {
            /* rare (a gap): the exact step counts cost nothing in the loop's common path */
            s->counts[lp_bucket(d)]++;
            for (int k = 0; k < LP_NSTEP; k++) {
                int hit = d >= s->step[k];
                s->at_least[k] += hit;
                s->lost[k] += hit ? d : 0;
            }
            lp_keep_top(s->top, &s->ntop, s->top_n, now, d);
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
    if (top_n < 0 || top_n > LP_MAX_TOP) {
        PyErr_Format(PyExc_ValueError, "top_n must be 0..%d", LP_MAX_TOP);
        return NULL;
    }
    if (use_tsc && !(LP_HAVE_TSC && lp_tsc_invariant()))
        use_tsc = 0;
    double hz = 1e9;
    if (use_tsc) {
        Py_BEGIN_ALLOW_THREADS
        hz = lp_tsc_hz();
        Py_END_ALLOW_THREADS
    }
    double tick_ns = 1e9 / hz;
    struct jitter_state *s = calloc(1, sizeof *s);
    if (!s)
        return PyErr_NoMemory();
    /* Prefault, as oslat does by mlockall + memset of its buffers: calloc may hand back fresh,
     * untouched pages, and the first gap that lands in a new page of `counts` would take a page
     * fault inside the timed loop and be counted as a gap of its own. */
    memset(s, 0, sizeof *s);
    lp_prefault_stack();
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
    for (int k = 0; k < LP_NSTEP; k++) {
        uint64_t t = (uint64_t)(LP_STEP_NS[k] / tick_ns + 0.999999);
        s->step[k] = LP_STEP_NS[k] >= thr_ns ? (t > s->thr ? t : s->thr) : UINT64_MAX;
    }
    uint64_t mono0, tsc0 = 0, wall_ns;
    Py_BEGIN_ALLOW_THREADS
    mono0 = lp_mono_ns();
    if (use_tsc)
        tsc0 = lp_tsc();
    uint64_t chunk_end = mono0 + chunk_ns;
    for (;;) {
        uint64_t now = lp_mono_ns();
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
    wall_ns = lp_mono_ns() - mono0;
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
    int counted[LP_NSTEP];
    for (int k = 0; k < LP_NSTEP; k++)
        counted[k] = s->step[k] != UINT64_MAX;
    PyObject *steps = lp_steps_list(s->at_least, s->lost, tick_ns, counted);
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

LP_METHODS(jitter,
    {"jitter_chunk", (PyCFunction)(void (*)(void))py_jitter_chunk, METH_VARARGS | METH_KEYWORDS,
     "jitter_chunk(chunk_ns, threshold_ns, on_ns, off_ns, top_n=16, use_tsc=True) -> dict: busy-read "
     "the clock for chunk_ns (on_ns sampling / off_ns asleep; on_ns=0 means always on); every gap "
     "goes into log buckets, gaps >= threshold_ns compete for the top_n list; at_least: [[step_ns, gaps, "
     "ns lost]] counted exactly for the steps 2, 10, 100 us and 1 ms at or above threshold_ns."});
