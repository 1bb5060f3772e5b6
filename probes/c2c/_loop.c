/* The core-to-core probe's loop (probes/c2c/): one cache line passed back and forth between two
 * pinned threads. */
#include "../_loops.h"

#include <sys/mman.h>


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

static void *c2c_partner(void *arg)
{
    struct c2c_shared *sh = arg;
    if (lp_pin_self(sh->cpu_b) != 0) {
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
    if (lp_pin_self(a) != 0)
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
                t0 = lp_mono_ns();
            atomic_store_explicit(line, 2 * i + 1, C2C_STORE);
            while (atomic_load_explicit(line, memory_order_acquire) != 2 * i + 2)
                ;
        }
        uint64_t t1 = lp_mono_ns();
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

LP_METHODS(c2c,
    {"c2c", py_c2c, METH_VARARGS,
     "c2c(cpu_a, cpu_b, round_trips, batches) -> [ns per round trip per batch]: one cache line "
     "passed back and forth between a thread on cpu_a and one on cpu_b."});
