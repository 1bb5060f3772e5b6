/* probes._native, first touch: what the first write to fresh anonymous memory costs (a page fault:
 * the kernel allocates and zeroes a page) against the second write (the page is there).
 *
 * touch_map maps anonymous memory aligned to 2 MiB (so transparent huge pages are possible), with an
 * madvise THP hint and optionally bound to one NUMA node (mbind MPOL_BIND). touch_pages writes one
 * byte per page over a range, timing the range with two clock reads and, when asked, every page with
 * one clock read each (its cost here: the probe's hello line says, ~9 ns with rdtsc), and counts the
 * minor and major faults and user and system time of the calling thread (getrusage RUSAGE_THREAD).
 * touch_nodes asks the kernel where sampled pages live (move_pages with no target: a query).
 * The mapping belongs to a capsule: touch_unmap, or the capsule's destructor, unmaps it, so an
 * exception or a cancelled run leaves nothing mapped.
 */
#include "../_loops.h"

#include <sys/mman.h>
#include <sys/resource.h>


#define HUGE_ALIGN (2ul << 20)
/* include/uapi/linux/mempolicy.h; not every libc ships <numaif.h> */
#define LP_MPOL_BIND 2
#define MAX_NODES 1024

struct region {
    unsigned char *base;
    size_t len;
};

#define CAPSULE "coremap.touch_region"

static void region_unmap(struct region *g)
{
    if (g->base)
        munmap(g->base, g->len);
    g->base = NULL;
}

static void capsule_free(PyObject *cap)
{
    struct region *g = PyCapsule_GetPointer(cap, CAPSULE);
    if (!g)
        return;
    region_unmap(g);
    free(g);
}

static struct region *region_of(PyObject *cap)
{
    struct region *g = PyCapsule_GetPointer(cap, CAPSULE);
    if (g && !g->base) {
        PyErr_SetString(PyExc_ValueError, "this region was unmapped");
        return NULL;
    }
    return g;
}

PyDoc_STRVAR(touch_map_doc,
             "touch_map(size, advice, node) -> region: anonymous memory aligned to 2 MiB; advice none, hugepage "
             "(MADV_HUGEPAGE) or nohugepage (MADV_NOHUGEPAGE); node >= 0 binds it there (mbind MPOL_BIND).");

static PyObject *py_touch_map(PyObject *self, PyObject *args)
{
    unsigned long long size;
    const char *advice;
    int node;
    if (!PyArg_ParseTuple(args, "Ksi", &size, &advice, &node))
        return NULL;
    int adv = -1;
    if (strcmp(advice, "hugepage") == 0)
        adv = MADV_HUGEPAGE;
    else if (strcmp(advice, "nohugepage") == 0)
        adv = MADV_NOHUGEPAGE;
    else if (strcmp(advice, "none") != 0) {
        PyErr_SetString(PyExc_ValueError, "advice is none, hugepage or nohugepage");
        return NULL;
    }
    if (size == 0 || node >= MAX_NODES) {
        PyErr_SetString(PyExc_ValueError, "size must be positive and node below 1024");
        return NULL;
    }
    struct region *g = calloc(1, sizeof *g);
    if (!g)
        return PyErr_NoMemory();
    int err = 0;
    Py_BEGIN_ALLOW_THREADS
    size_t len = (size_t)size;
    /* map 2 MiB more, keep the 2 MiB-aligned stretch: a huge page needs an aligned 2 MiB */
    unsigned char *raw = mmap(NULL, len + HUGE_ALIGN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        err = errno;
    } else {
        uintptr_t start = ((uintptr_t)raw + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1);
        size_t head = start - (uintptr_t)raw, tail = HUGE_ALIGN - head;
        if (head)
            munmap(raw, head);
        if (tail)
            munmap((unsigned char *)start + len, tail);
        g->base = (unsigned char *)start;
        g->len = len;
        if (adv >= 0 && madvise(g->base, len, adv) != 0)
            err = errno;
        if (!err && node >= 0) {
            unsigned long mask[MAX_NODES / (8 * sizeof(unsigned long))];
            memset(mask, 0, sizeof mask);
            mask[node / (8 * sizeof(unsigned long))] |= 1ul << (node % (8 * sizeof(unsigned long)));
            /* maxnode counts one more than the bits the kernel reads (mm/mempolicy.c get_nodes) */
            if (syscall(SYS_mbind, g->base, len, LP_MPOL_BIND, mask, (unsigned long)MAX_NODES + 1, 0) != 0)
                err = errno;
        }
        if (err)
            region_unmap(g);
    }
    Py_END_ALLOW_THREADS
    if (err) {
        free(g);
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    PyObject *cap = PyCapsule_New(g, CAPSULE, capsule_free);
    if (!cap) {
        region_unmap(g);
        free(g);
    }
    return cap;
}

static uint64_t tv_ns(struct timeval tv)
{
    return (uint64_t)tv.tv_sec * 1000000000ull + (uint64_t)tv.tv_usec * 1000ull;
}

PyDoc_STRVAR(touch_pages_doc,
             "touch_pages(region, offset, length, page, per_page, tsc_hz, stall_ns=1e6) -> {pages, ns, cpu_ns, "
             "minor_faults, major_faults, user_ns, sys_ns, switches, buckets, max_ns, stalls, stall_ns}: write one "
             "byte per page of the range; per_page also times each page into log buckets and counts the pages "
             "that took stall_ns or more (a huge page's allocation that had to compact memory first).");

static PyObject *py_touch_pages(PyObject *self, PyObject *args)
{
    PyObject *cap;
    unsigned long long offset, length, page;
    int per_page;
    double tsc_hz, stall_ns = 1e6;
    if (!PyArg_ParseTuple(args, "OKKKpd|d", &cap, &offset, &length, &page, &per_page, &tsc_hz, &stall_ns))
        return NULL;
    struct region *g = region_of(cap);
    if (!g)
        return NULL;
    if (page == 0 || offset > g->len || length > g->len - offset) {
        PyErr_SetString(PyExc_ValueError, "the range lies outside the region, or the page size is 0");
        return NULL;
    }
    uint64_t *counts = per_page ? calloc(LP_NBUCKETS, sizeof *counts) : NULL;
    if (per_page && !counts)
        return PyErr_NoMemory();
    struct lp_clock clk;
    lp_clock_init(&clk, tsc_hz);
    struct rusage ru0, ru1;
    struct timespec c0, c1;
    uint64_t t0, t1, pages = 0, worst = 0, stalls = 0, stalled = 0;
    const uint64_t stall = (uint64_t)(stall_ns / clk.ns_per_tick);
    Py_BEGIN_ALLOW_THREADS
    volatile unsigned char *p = g->base + offset;
    getrusage(RUSAGE_THREAD, &ru0);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    t0 = lp_now(&clk);
    if (per_page) {
        uint64_t prev = t0;
        for (uint64_t o = 0; o < length; o += page) {
            p[o] = 1;
            uint64_t now = lp_now(&clk);
            uint64_t d = now - prev;
            counts[lp_bucket(d)]++;
            if (d > worst)
                worst = d;
            if (d >= stall) {
                stalls++;
                stalled += d;
            }
            prev = now;
            pages++;
        }
        t1 = prev;
    } else {
        for (uint64_t o = 0; o < length; o += page) {
            p[o] = 1;
            pages++;
        }
        t1 = lp_now(&clk);
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    getrusage(RUSAGE_THREAD, &ru1);
    Py_END_ALLOW_THREADS
    PyObject *buckets;
    if (per_page) {
        buckets = lp_buckets_list(counts, clk.ns_per_tick);
        free(counts);
        if (!buckets)
            return NULL;
    } else {
        buckets = PyList_New(0);
    }
    return Py_BuildValue("{s:K,s:d,s:d,s:K,s:K,s:K,s:K,s:K,s:N,s:d,s:K,s:d}", "pages", (unsigned long long)pages,
                         "ns", lp_ns(&clk, t1 - t0), "cpu_ns", (double)(lp_timespec_ns(&c1) - lp_timespec_ns(&c0)),
                         "minor_faults", (unsigned long long)(ru1.ru_minflt - ru0.ru_minflt),
                         "major_faults", (unsigned long long)(ru1.ru_majflt - ru0.ru_majflt),
                         "user_ns", (unsigned long long)(tv_ns(ru1.ru_utime) - tv_ns(ru0.ru_utime)),
                         "sys_ns", (unsigned long long)(tv_ns(ru1.ru_stime) - tv_ns(ru0.ru_stime)),
                         "switches", (unsigned long long)(ru1.ru_nvcsw + ru1.ru_nivcsw - ru0.ru_nvcsw - ru0.ru_nivcsw),
                         "buckets", buckets, "max_ns", lp_ns(&clk, worst),
                         "stalls", (unsigned long long)stalls, "stall_ns", lp_ns(&clk, stalled));
}

PyDoc_STRVAR(touch_nodes_doc,
             "touch_nodes(region, samples) -> {node or -errno: pages}: where evenly spaced pages live (move_pages).");

static PyObject *py_touch_nodes(PyObject *self, PyObject *args)
{
    PyObject *cap;
    int samples;
    if (!PyArg_ParseTuple(args, "Oi", &cap, &samples))
        return NULL;
    struct region *g = region_of(cap);
    if (!g)
        return NULL;
    if (samples < 1 || samples > 65536) {
        PyErr_SetString(PyExc_ValueError, "samples must be 1..65536");
        return NULL;
    }
    void **pages = calloc((size_t)samples, sizeof *pages);
    int *status = calloc((size_t)samples, sizeof *status);
    if (!pages || !status) {
        free(pages);
        free(status);
        return PyErr_NoMemory();
    }
    long r;
    Py_BEGIN_ALLOW_THREADS
    for (int i = 0; i < samples; i++)
        pages[i] = g->base + (g->len / (size_t)samples) * (size_t)i;
    /* nodes == NULL: move nothing, report each page's node in status (move_pages(2)) */
    r = syscall(SYS_move_pages, 0, (unsigned long)samples, pages, NULL, status, 0);
    Py_END_ALLOW_THREADS
    free(pages);
    if (r != 0) {
        free(status);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    PyObject *out = PyDict_New();
    for (int i = 0; out && i < samples; i++) {
        /* a negative status is -errno: -ENOENT for a page not present, and so on */
        PyObject *k = PyLong_FromLong(status[i]);
        PyObject *old = k ? PyDict_GetItem(out, k) : NULL;
        PyObject *v = PyLong_FromLong(old ? PyLong_AsLong(old) + 1 : 1);
        if (!k || !v || PyDict_SetItem(out, k, v) < 0)
            Py_CLEAR(out);
        Py_XDECREF(k);
        Py_XDECREF(v);
    }
    free(status);
    return out;
}

PyDoc_STRVAR(touch_unmap_doc,
             "touch_unmap(region): unmap now (the destructor does it otherwise).");

static PyObject *py_touch_unmap(PyObject *self, PyObject *cap)
{
    struct region *g = PyCapsule_GetPointer(cap, CAPSULE);
    if (!g)
        return NULL;
    region_unmap(g);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(touch_address_doc,
             "touch_address(region) -> (address, length)");

static PyObject *py_touch_address(PyObject *self, PyObject *cap)
{
    struct region *g = region_of(cap);
    if (!g)
        return NULL;
    return Py_BuildValue("(KK)", (unsigned long long)(uintptr_t)g->base, (unsigned long long)g->len);
}

LP_METHODS(first_touch,
    {"touch_map", py_touch_map, METH_VARARGS, touch_map_doc},
    {"touch_pages", py_touch_pages, METH_VARARGS, touch_pages_doc},
    {"touch_nodes", py_touch_nodes, METH_VARARGS, touch_nodes_doc},
    {"touch_address", py_touch_address, METH_O, touch_address_doc},
    {"touch_unmap", py_touch_unmap, METH_O, touch_unmap_doc});
