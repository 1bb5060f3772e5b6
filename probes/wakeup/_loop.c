/* The wakeup probe's loop (probes/wakeup/): clock_nanosleep to an absolute due time, every latency
 * into log buckets (_loops.h's scheme, in ns), the latest kept with their due times. */
#include "../_loops.h"

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
    if (top_n < 0 || top_n > LP_MAX_TOP) {
        PyErr_Format(PyExc_ValueError, "top_n must be 0..%d", LP_MAX_TOP);
        return NULL;
    }
    uint64_t *counts = calloc(LP_NBUCKETS, sizeof *counts);
    if (!counts)
        return PyErr_NoMemory();
    struct lp_gap top[LP_MAX_TOP];
    int ntop = 0;
    uint64_t at_least[LP_NSTEP] = {0}, lost[LP_NSTEP] = {0};
    uint64_t n = 0, max = 0, min = UINT64_MAX, sum = 0, t0, wall;
    Py_BEGIN_ALLOW_THREADS
    t0 = lp_mono_ns();
    uint64_t target = t0 + interval_ns, end = t0 + chunk_ns;
    while (target <= end) {
        struct timespec ts = {(time_t)(target / 1000000000ull), (long)(target % 1000000000ull)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
        uint64_t now = lp_mono_ns();
        uint64_t lat = now > target ? now - target : 0;
        counts[lp_bucket(lat)]++;
        n++;
        sum += lat;
        if (lat > max)
            max = lat;
        if (lat < min)
            min = lat;
        /* the same exact steps as the jitter loop counts (LP_STEP_NS), for the per-CPU figures */
        for (int k = 0; k < LP_NSTEP; k++) {
            int hit = lat >= LP_STEP_NS[k];
            at_least[k] += hit;
            lost[k] += hit ? lat : 0;
        }
        if (lat >= LP_STEP_NS[0])
            lp_keep_top(top, &ntop, top_n, target, lat);  /* with its due time: what ran between (timerlat -a) */
        target += interval_ns;
        /* A wakeup later than a whole interval skips the missed periods, as cyclictest does
         * (its "-i" loop re-arms from the next period), rather than firing a burst. */
        while (target < now)
            target += interval_ns;
    }
    wall = lp_mono_ns() - t0;
    Py_END_ALLOW_THREADS
    PyObject *buckets = lp_buckets_list(counts, 1.0);
    free(counts);
    PyObject *late = PyList_New(0), *steps = lp_steps_list(at_least, lost, 1.0, NULL);
    for (int i = 0; late && i < ntop; i++) {
        /* [due, latency]: CLOCK_MONOTONIC ns, as the jitter loop's [gap start, length] */
        PyObject *row = Py_BuildValue("[KK]", (unsigned long long)top[i].at, (unsigned long long)top[i].len);
        if (!row || PyList_Append(late, row) < 0)
            Py_CLEAR(late);
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

LP_METHODS(wakeup,
    {"wakeup_chunk", (PyCFunction)(void (*)(void))py_wakeup_chunk, METH_VARARGS | METH_KEYWORDS,
     "wakeup_chunk(chunk_ns, interval_ns, top_n=0) -> dict: clock_nanosleep(TIMER_ABSTIME) every interval; "
     "latency = wake - target in log buckets; late: the top_n latest of at least 2 us as [due_ns, latency_ns]; "
     "at_least: [[step_ns, wakeups >= it, ns late in them], ...]."});
