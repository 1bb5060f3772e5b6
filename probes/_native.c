/* probes._native: what every probe's loop shares, and the module they are compiled into.
 *
 * Each probe's loop is its own file beside its runner, probes/<name>/_loop.c, registering its
 * functions with LP_METHODS (_loops.h); this file holds the module, the TSC (its rate, measured once
 * per process, and whether it may be used), memory locking, timer slack, pinning, and count_command
 * (the counters probe's run of a command under perf counters, which scaling and first-touch's JVM runs
 * use too). setup.py builds every one of these files into the one extension (probes/build.py), and a
 * shipped agent builds the same set on the far side.
 *
 * Every loop runs with the GIL released and returns a whole chunk's worth of results (sparse
 * bucket counts, a few top gaps), so Python never sits in a per-sample loop.
 */
#include "_loops.h"       /* lp_tsc, the log buckets: one scheme for every probe's histogram */

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <linux/perf_event.h>



/* ---------------------------------------------------------------- tsc_info */

int lp_tsc_invariant(void)
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


/* One (TSC, CLOCK_MONOTONIC_RAW) pair read as close together as this CPU allows: of a few tries, the
 * one whose two TSC reads around the clock read are nearest, with the TSC taken at their midpoint. A
 * try the kernel interrupted (an IRQ, a vCPU preempted) is the widest and never chosen, so the pair is
 * good to ~10 ns wherever it is read. */
static void tsc_clock_pair(uint64_t *tsc, uint64_t *ns)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 16; i++) {
        uint64_t a = lp_tsc();
        uint64_t n = lp_clock_ns(CLOCK_MONOTONIC_RAW);
        uint64_t b = lp_tsc();
        if (b - a < best) {
            best = b - a;
            *tsc = a + (b - a) / 2;
            *ns = n;
        }
    }
}

static double calibrate_tsc(void)
{
    /* Two tight pairs of the clocks 10 ms apart; CLOCK_MONOTONIC_RAW is not slewed by NTP, so the rate
     * is the hardware's. Each pair is good to ~10 ns (tsc_clock_pair), so the rate is good to a few
     * parts per million: what a single pair of reads around a 60 ms wait gave when nothing interrupted
     * it, and far better when something did. A probe process pays this once, before its hello (issue 31:
     * the 60 ms wait was a third of a short run's cost). */
    uint64_t t0 = 0, n0 = 0, t1 = 0, n1 = 0;
    tsc_clock_pair(&t0, &n0);
    while (lp_clock_ns(CLOCK_MONOTONIC_RAW) - n0 < 10000000ull)
        ;
    tsc_clock_pair(&t1, &n1);
    return (double)(t1 - t0) * 1e9 / (double)(n1 - n0);
}

double lp_tsc_hz(void)
{
    static double hz = 0.0;
    if (hz == 0.0)
        hz = calibrate_tsc();
    return hz;
}

int lp_pin_self(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set);
}

static PyObject *py_tsc_info(PyObject *self, PyObject *args)
{
    int usable = LP_HAVE_TSC && lp_tsc_invariant();
    double hz = 0, rdtsc_ns = 0, cgt_ns = 0;
    Py_BEGIN_ALLOW_THREADS
    if (usable) {
        hz = lp_tsc_hz();
        const int n = 100000;   /* ~1-2 ms: the mean of a read's cost, stable to a tenth of a ns */
        volatile uint64_t sink = 0;
        uint64_t a = lp_tsc();
        for (int i = 0; i < n; i++)
            sink += lp_tsc();
        uint64_t b = lp_tsc();
        rdtsc_ns = (double)(b - a) / n * 1e9 / hz;
        (void)sink;
    }
    {
        const int n = 50000;
        volatile uint64_t sink = 0;
        uint64_t a = lp_mono_ns();
        for (int i = 0; i < n; i++)
            sink += lp_mono_ns();
        uint64_t b = lp_mono_ns();
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
__attribute__((noinline)) void lp_prefault_stack(void)
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
    lp_prefault_stack();
    Py_RETURN_NONE;
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
        if (cpu >= 0 && lp_pin_self(cpu) != 0) {
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
        wall0 = lp_mono_ns();
        (void)!write(go[1], "g", 1);
        close(go[1]);
        ssize_t r = read(fail[0], &exec_errno, sizeof exec_errno);
        if (r != (ssize_t)sizeof exec_errno)
            exec_errno = 0; /* EOF: exec succeeded and closed the CLOEXEC pipe */
        close(fail[0]);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        wall1 = lp_mono_ns();
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
    {"lock_memory", py_lock_memory, METH_NOARGS,
     "lock_memory(): mlockall(MCL_CURRENT | MCL_FUTURE) and prefault 64 KiB of stack; OSError if refused."},
    {"set_timer_slack", py_set_timer_slack, METH_VARARGS, "prctl(PR_SET_TIMERSLACK, ns)"},
    {"get_timer_slack", py_get_timer_slack, METH_NOARGS, "prctl(PR_GET_TIMERSLACK)"},
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
