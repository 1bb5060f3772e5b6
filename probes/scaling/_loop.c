/* probes._native, scaling: N threads spread over a CPU list (thread i pinned to CPU i mod the list's
 * length), or all unpinned, sharing a fixed number of operations: each takes the next batch of 256
 * from a shared counter until none is left, so a thread on a CPU that a neighbour keeps busy does
 * less and the others more, as with any pool of workers. Every operation is a little private
 * arithmetic (8 xorshift rounds, ~10 ns) and then
 *   lock:    the same pthread mutex for all threads, held to update four shared cache lines (a
 *            row, its index, a counter: what a database's hot lock guards);
 *   atomic:  a compare-and-swap on one shared word, retried until it lands;
 *   private: the same update on the thread's own cache lines.
 * The time a thread waits is measured only when it has to wait (a failed trylock, a failed CAS), so
 * an uncontended operation pays no clock read; that wait is the "time spent spinning or blocked"
 * (a contended glibc mutex sleeps in futex(2); a failed CAS spins).
 *
 * Lifecycle of one run: scaling_start creates the threads, which set their affinity and wait;
 * scaling_go releases them with a number of operations each and returns when all have finished;
 * Python reads their /proc counters (see _loops.h); scaling_release lets them exit. A capsule dropped
 * early is stopped and released by its destructor.
 */
#include "../_loops.h"

#include <sys/resource.h>


enum { W_LOCK, W_ATOMIC, W_PRIVATE };
static const char *const WORKS[] = {"lock", "atomic", "private"};
#define MAX_THREADS 1024

#define LINES 4             /* cache lines an operation updates (64 bytes each) */
#define BATCH 256           /* operations a thread takes from the pool at a time */

struct shared {
    _Alignas(128) pthread_mutex_t m;
    _Alignas(128) uint64_t data[LINES][8];      /* guarded by m */
    _Alignas(128) _Atomic uint64_t counter;
    _Alignas(128) _Atomic uint64_t next;        /* the pool: operations handed out so far */
};

struct worker {
    _Alignas(128) volatile uint64_t data[LINES][8];    /* the private work's */
    pid_t tid;
    int pin_err;
    uint64_t ops, wait, contended, t0, t1;  /* ticks */
    uint64_t cpu_ns, user_ns, sys_ns, switches;
};

struct srun {
    struct lp_run head;             /* first: the capsule's run (_loops.h) */
    int work, nthreads, created;
    struct lp_clock clk;
    int *cpus;                      /* thread i runs on cpus[i % ncpus]; NULL: unpinned */
    int ncpus;
    struct lp_latch ready, go, done, release;
    _Atomic int abort_run;
    uint64_t ops, t_go;
    struct shared *sh;
    struct worker *w;
    pthread_t *threads;
};

struct arg {
    struct srun *r;
    int i;
};

static inline uint64_t private_work(uint64_t x)
{
    /* xorshift, not an affine step: the compiler cannot fold eight rounds into one */
    for (int k = 0; k < 8; k++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    return x;
}

/* The next batch of the pool: its size (0 when the pool is empty). */
static inline uint64_t take(struct srun *r)
{
    uint64_t start = atomic_fetch_add_explicit(&r->sh->next, BATCH, memory_order_relaxed);
    return start >= r->ops ? 0 : (r->ops - start < BATCH ? r->ops - start : BATCH);
}

static void run_ops(struct srun *r, struct worker *me, uint64_t seed)
{
    struct shared *sh = r->sh;
    const struct lp_clock *clk = &r->clk;
    uint64_t x = seed | 1, wait = 0, contended = 0, done = 0, n;
    while ((n = take(r)) != 0) {
        done += n;
        if (r->work == W_LOCK) {
            for (uint64_t i = 0; i < n; i++) {
                x = private_work(x);
                if (pthread_mutex_trylock(&sh->m) != 0) {
                    uint64_t w0 = lp_now(clk);
                    pthread_mutex_lock(&sh->m);
                    wait += lp_now(clk) - w0;
                    contended++;
                }
                for (int l = 0; l < LINES; l++)
                    sh->data[l][l] += x >> l;
                pthread_mutex_unlock(&sh->m);
            }
        } else if (r->work == W_ATOMIC) {
            for (uint64_t i = 0; i < n; i++) {
                x = private_work(x);
                uint64_t old = atomic_load_explicit(&sh->counter, memory_order_relaxed);
                if (!atomic_compare_exchange_weak(&sh->counter, &old, old + (x | 1))) {
                    uint64_t w0 = lp_now(clk);
                    while (!atomic_compare_exchange_weak(&sh->counter, &old, old + (x | 1)))
                        ;
                    wait += lp_now(clk) - w0;
                    contended++;
                }
            }
        } else {
            for (uint64_t i = 0; i < n; i++) {
                x = private_work(x);
                for (int l = 0; l < LINES; l++)
                    me->data[l][l] += x >> l;
            }
        }
    }
    me->ops = done;
    me->wait = wait;
    me->contended = contended;
}

static uint64_t tv_ns(struct timeval tv)
{
    return (uint64_t)tv.tv_sec * 1000000000ull + (uint64_t)tv.tv_usec * 1000ull;
}

static void *scaling_thread(void *p)
{
    struct arg *a = p;
    struct srun *r = a->r;
    int a_i = a->i;
    struct worker *me = &r->w[a_i];
    uint64_t seed = 0x9E3779B97F4A7C15ull * (uint64_t)(a_i + 1);
    free(a);
    me->tid = lp_gettid();
    if (r->cpus) {
        /* one CPU per thread: a width's threads must run side by side, not be stacked on one of its
         * CPUs by a scheduler that sees the other one busy with someone else's work */
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(r->cpus[a_i % r->ncpus], &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0)
            me->pin_err = errno;
    }
    lp_latch_add(&r->ready, 1);
    lp_latch_wait(&r->go, 1);
    if (!atomic_load(&r->abort_run)) {
        struct rusage ru0, ru1;
        struct timespec c0, c1;
        getrusage(RUSAGE_THREAD, &ru0);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
        me->t0 = lp_now(&r->clk);
        run_ops(r, me, seed);
        me->t1 = lp_now(&r->clk);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
        getrusage(RUSAGE_THREAD, &ru1);
        me->cpu_ns = lp_timespec_ns(&c1) - lp_timespec_ns(&c0);
        me->user_ns = tv_ns(ru1.ru_utime) - tv_ns(ru0.ru_utime);
        me->sys_ns = tv_ns(ru1.ru_stime) - tv_ns(ru0.ru_stime);
        me->switches = (uint64_t)(ru1.ru_nvcsw + ru1.ru_nivcsw - ru0.ru_nvcsw - ru0.ru_nivcsw);
    }
    lp_latch_add(&r->done, 1);
    lp_latch_wait(&r->release, 1);
    return NULL;
}

#define CAPSULE "coremap.scaling"

static void release_run(struct lp_run *h)
{
    struct srun *r = (struct srun *)h;
    atomic_store(&r->abort_run, 1);
    lp_latch_add(&r->go, 1);
    lp_latch_add(&r->release, 1);
    for (int i = 0; i < r->created; i++)
        pthread_join(r->threads[i], NULL);
    if (r->sh)
        pthread_mutex_destroy(&r->sh->m);
    free(r->sh);
    free(r->w);
    free(r->threads);
    free(r->cpus);
    r->cpus = NULL;
    r->sh = NULL;
    r->w = NULL;
    r->threads = NULL;
    lp_latch_destroy(&r->ready);
    lp_latch_destroy(&r->go);
    lp_latch_destroy(&r->done);
    lp_latch_destroy(&r->release);
}

static struct srun *run_of(PyObject *cap)
{
    return (struct srun *)lp_run_of(cap, CAPSULE, 0);
}

/* The CPUs thread i is pinned to (cpus[i % ncpus]), from a list of CPU ids; None leaves them unpinned. */
static int take_cpus(struct srun *r, PyObject *cpus)
{
    if (cpus == Py_None)
        return 0;
    cpu_set_t set;
    int given;
    if (lp_cpuset(cpus, &set, &given) < 0)
        return -1;
    r->cpus = calloc(CPU_COUNT(&set), sizeof *r->cpus);
    if (!r->cpus) {
        PyErr_NoMemory();
        return -1;
    }
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            r->cpus[r->ncpus++] = c;
    return 0;
}

static PyObject *py_scaling_start(PyObject *self, PyObject *args)
{
    const char *work;
    int nthreads;
    PyObject *cpus;
    double tsc_hz;
    if (!PyArg_ParseTuple(args, "siOd", &work, &nthreads, &cpus, &tsc_hz))
        return NULL;
    int wk = -1;
    for (int i = 0; i < 3; i++)
        if (strcmp(work, WORKS[i]) == 0)
            wk = i;
    if (wk < 0 || nthreads < 1 || nthreads > MAX_THREADS) {
        PyErr_SetString(PyExc_ValueError, "work is lock, atomic or private; threads 1..1024");
        return NULL;
    }
    struct srun *r = calloc(1, sizeof *r);
    if (!r)
        return PyErr_NoMemory();
    r->work = wk;
    r->nthreads = nthreads;
    lp_clock_init(&r->clk, tsc_hz);
    lp_latch_init(&r->ready);
    lp_latch_init(&r->go);
    lp_latch_init(&r->done);
    lp_latch_init(&r->release);
    r->sh = aligned_alloc(128, sizeof *r->sh);
    r->w = aligned_alloc(128, sizeof *r->w * (size_t)nthreads);
    r->threads = calloc((size_t)nthreads, sizeof *r->threads);
    r->head = (struct lp_run){"scaling run", release_run, 0};
    PyObject *cap = lp_capsule(&r->head, CAPSULE);
    if (!cap)
        return NULL;
    if (!r->sh || !r->w || !r->threads) {
        Py_DECREF(cap);
        return PyErr_NoMemory();
    }
    memset(r->sh, 0, sizeof *r->sh);
    memset(r->w, 0, sizeof *r->w * (size_t)nthreads);
    pthread_mutex_init(&r->sh->m, NULL);
    if (take_cpus(r, cpus) < 0) {
        Py_DECREF(cap);
        return NULL;
    }
    int err = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int i = 0; i < nthreads; i++) {
        struct arg *a = malloc(sizeof *a);
        if (!a) {
            err = ENOMEM;
            break;
        }
        a->r = r;
        a->i = i;
        if ((err = pthread_create(&r->threads[i], NULL, scaling_thread, a)) != 0) {
            free(a);
            break;
        }
        r->created++;
    }
    lp_latch_wait(&r->ready, r->created);
    Py_END_ALLOW_THREADS
    for (int i = 0; i < r->created && !err; i++)
        err = r->w[i].pin_err;
    if (err) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        Py_DECREF(cap);
        return NULL;
    }
    return cap;
}

static PyObject *py_scaling_tids(PyObject *self, PyObject *cap)
{
    struct srun *r = run_of(cap);
    if (!r)
        return NULL;
    PyObject *out = PyList_New(r->created);
    for (int i = 0; out && i < r->created; i++)
        PyList_SET_ITEM(out, i, PyLong_FromLong(r->w[i].tid));
    return out;
}

static PyObject *py_scaling_go(PyObject *self, PyObject *args)
{
    PyObject *cap;
    unsigned long long ops;
    if (!PyArg_ParseTuple(args, "OK", &cap, &ops))
        return NULL;
    struct srun *r = run_of(cap);
    if (!r)
        return NULL;
    if (r->ops || r->t_go) {
        PyErr_SetString(PyExc_ValueError, "a scaling run goes once");
        return NULL;
    }
    r->ops = ops;
    Py_BEGIN_ALLOW_THREADS
    r->t_go = lp_now(&r->clk);
    lp_latch_add(&r->go, 1);
    lp_latch_wait(&r->done, r->created);
    Py_END_ALLOW_THREADS
    uint64_t end = r->t_go;
    PyObject *threads = PyList_New(0);
    for (int i = 0; threads && i < r->created; i++) {
        struct worker *w = &r->w[i];
        if (w->t1 > end)
            end = w->t1;
        PyObject *d = Py_BuildValue(
            "{s:i,s:K,s:d,s:d,s:K,s:K,s:K,s:K,s:K}", "tid", (int)w->tid, "ops", (unsigned long long)w->ops,
            "wall_ns", lp_ns(&r->clk, w->t1 - w->t0), "wait_ns", lp_ns(&r->clk, w->wait),
            "contended", (unsigned long long)w->contended, "cpu_ns", (unsigned long long)w->cpu_ns,
            "user_ns", (unsigned long long)w->user_ns, "sys_ns", (unsigned long long)w->sys_ns,
            "switches", (unsigned long long)w->switches);
        if (!d || PyList_Append(threads, d) < 0)
            Py_CLEAR(threads);
        Py_XDECREF(d);
    }
    if (!threads)
        return NULL;
    return Py_BuildValue("{s:d,s:N}", "wall_ns", lp_ns(&r->clk, end - r->t_go), "threads", threads);
}

static PyObject *py_scaling_release(PyObject *self, PyObject *cap)
{
    return lp_release_capsule(cap, CAPSULE);
}

LP_METHODS(scaling,
    {"scaling_start", py_scaling_start, METH_VARARGS,
     "scaling_start(work, threads, cpus, tsc_hz) -> run: `threads` threads, thread i pinned to the i-th "
     "CPU of `cpus` (round robin; None: unpinned), ready for scaling_go. work: lock, atomic or private."},
    {"scaling_tids", py_scaling_tids, METH_O, "scaling_tids(run) -> [tid, ...]"},
    {"scaling_go", py_scaling_go, METH_VARARGS,
     "scaling_go(run, ops) -> {wall_ns, threads: [{tid, ops, wall_ns, wait_ns, contended, cpu_ns, user_ns, "
     "sys_ns, switches}]}: the threads share `ops` operations; returns when all are done (they stay "
     "until scaling_release)."},
    {"scaling_release", py_scaling_release, METH_O, "scaling_release(run): let the threads exit and join them."});
