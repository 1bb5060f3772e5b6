/* The sweep probe's loop (probes/sweep/): one unit of L1-resident work, timed. */
#include "../_loops.h"

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
    t0 = lp_mono_ns();
    for (uint64_t i = 0; i < iters; i++) {
        x = x * 1664525u + 1013904223u;
        uint32_t j = x >> 24;
        table[j] ^= x + (table[(j + 1) & 255] >> 3);
        acc += table[j];
    }
    t1 = lp_mono_ns();
    Py_END_ALLOW_THREADS
    return Py_BuildValue("(KI)", (unsigned long long)(t1 - t0), (unsigned)acc);
}

LP_METHODS(sweep,
    {"work_unit", py_work_unit, METH_VARARGS,
     "work_unit(iterations) -> (ns, checksum): an L1-resident LCG/hash loop."});
