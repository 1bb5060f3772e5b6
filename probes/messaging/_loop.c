/* probes._native, messaging: a sender thread and a receiver thread exchanging fixed-size messages as
 * fast as they can, over a shared-memory SPSC ring, a pipe, or UDP on loopback (multicast to
 * 239.255.77.1 where the kernel delivers it there, else unicast). Each thread is pinned to its own
 * CPU set or left where the scheduler puts it.
 *
 * Every message carries the sender's clock at send time; the receiver reads the clock when it takes
 * the message, so one-way latency is measured per message (in log buckets, see _loops.h), and counts
 * messages into fixed windows (100 ms by default) from a common start, which is the throughput step
 * plot. The receiver publishes each window as it closes; Python (probes/messaging/measure.py) collects them
 * as they come and streams them as JSON lines.
 *
 * Lifecycle (one placement's segment): messaging_start creates both threads, which pin themselves and
 * wait; messaging_go starts them; messaging_windows hands out closed windows; after the last window
 * the receiver stops the sender and both wait to be released; messaging_stop returns the totals;
 * Python reads both threads' /proc counters; messaging_release lets them exit and frees everything.
 * A capsule dropped early (an exception, Cancel) is stopped and released by its destructor.
 *
 * Pacing: with a rate, the sender sends one message per period (1e9 / rate ns), waiting for each
 * slot as a paced feed would (spin, then yield: lp_backoff); a sender held off for more than a period
 * does not burst to catch up, it starts the schedule again from now, so the achieved rate says how
 * well it kept the pace. Rate 0: as fast as it can (saturation).
 *
 * Where the threads ran: each side reads its CPU (sched_getcpu) every CPU_EVERY messages and when it
 * waits, and the receiver keeps both sides' last CPU in each window, and how often each was seen to
 * change: the unpinned placement's CPU steps over time (sampled, not every migration: /proc counts those).
 *
 * Loss: at the end the receiver, after the last window, waits for the sender to stop and counts what
 * is still on the way (the ring's unread slots, the pipe's bytes, the datagrams queued on the socket)
 * as drained, not lost: only what the kernel dropped (UDP, a full receive buffer) is sent - received -
 * drained.
 *
 * The loops are what a latency-critical program would write: the ring is a Lamport queue whose
 * indices sit on their own 128-byte blocks (each side caches the other's index and reads it again only
 * when the ring looks full or empty); waiting sides spin, then yield (lp_backoff), so a sender and a
 * receiver sharing one CPU still take turns. The pipe moves one message per write and up to 64 per
 * read; UDP one datagram per send and per recv. tests/benchmarks/msg_peer.c is the same transfer as a
 * standalone program, the benchmark's peer.
 */
#include "../_loops.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/socket.h>


#define MSG_BYTES 64
/* 1,024 slots of 64 bytes: 64 KiB, the depth of a pipe's default buffer (16 pages) */
#define RING_SLOTS 1024
#define PIPE_READ_MSGS 64
#define UDP_GROUP "239.255.77.1"
#define UDP_RCV_TIMEOUT_US 10000
#define UDP_HANDSHAKE_MS 200
#define CPU_EVERY 256           /* messages between two reads of a side's CPU */
#define UDP_DRAIN_MS 20         /* how long the receiver waits for a datagram still on the way */

enum { T_SHM, T_PIPE, T_UDP };
static const char *const TRANSPORTS[] = {"shm", "pipe", "udp"};

struct msg {
    uint64_t stamp;
    uint64_t seq;
    unsigned char body[MSG_BYTES - 16];
};

struct ring {
    _Alignas(128) _Atomic uint64_t head; /* written by the sender only */
    char pad_head[128 - sizeof(uint64_t)];
    _Alignas(128) _Atomic uint64_t tail; /* written by the receiver only */
    char pad_tail[128 - sizeof(uint64_t)];
    _Alignas(128) struct msg slots[RING_SLOTS];
};

struct window {
    uint64_t messages;
    uint64_t lat_sum;   /* ticks: integer adds per message, converted once per window */
    uint64_t lat_max;   /* ticks */
    int send_cpu, recv_cpu;     /* each side's CPU when last read in this window (-1: not read) */
    int send_moves, recv_moves; /* changes of CPU seen in this window (sampled) */
};

struct mrun {
    struct lp_run head;     /* first: the capsule's run (_loops.h) */
    int transport;
    struct lp_clock clk;
    uint64_t interval;  /* ticks */
    uint64_t period;    /* ticks between two sends; 0: as fast as it can */
    long n_windows;
    cpu_set_t sets[2];  /* 0: sender, 1: receiver */
    int given[2];
    int pin_err[2];
    pid_t tids[2];
    pthread_t threads[2];
    int nthreads;       /* threads created */
    struct lp_latch ready, go, windows, stopped, release;
    int recv_ended;     /* under windows.m: no more windows will come */
    _Atomic int done;
    _Atomic int abort_run;
    _Atomic int sender_stopped;
    _Atomic int send_cpu;       /* the sender's CPU when it last read it */
    _Atomic int send_moves;     /* changes of the sender's CPU it has seen */
    uint64_t t_go;
    /* transports */
    struct ring *ring;
    int pipe_r, pipe_w;
    int udp_r, udp_s;
    char udp_mode[160];
    /* results (the receiver's, read once it has stopped) */
    struct window *win;
    uint64_t lat_counts[LP_NBUCKETS];
    uint64_t lat_min, lat_max, lat_sum;  /* ticks */
    uint64_t received, sent, drained, t_end;
};

/* ---------------------------------------------------------------- receiver bookkeeping */

struct rx {
    struct mrun *r;
    long w;             /* the open window */
    uint64_t w_end;     /* its end, ticks */
    struct window cur;
    int cpu;            /* the receiver's CPU when last read */
    int send_moves;     /* the sender's count of moves when the window opened */
};

/* A side's CPU now; `moves` counts a change from `*cpu`. */
static inline void read_cpu(int *cpu, int *moves)
{
    int now = sched_getcpu();
    if (*cpu >= 0 && now != *cpu)
        (*moves)++;
    *cpu = now;
}

/* Close every window that ended before `now`; returns 1 once the last one is closed. */
static int rx_advance(struct rx *x, uint64_t now)
{
    struct mrun *r = x->r;
    while (now >= x->w_end) {
        read_cpu(&x->cpu, &x->cur.recv_moves);
        int moved = atomic_load_explicit(&r->send_moves, memory_order_relaxed);
        x->cur.recv_cpu = x->cpu;
        x->cur.send_cpu = atomic_load_explicit(&r->send_cpu, memory_order_relaxed);
        x->cur.send_moves = moved - x->send_moves;
        x->send_moves = moved;
        r->win[x->w] = x->cur;
        memset(&x->cur, 0, sizeof x->cur);
        x->w++;
        x->w_end += r->interval;
        lp_latch_add(&r->windows, 1);
        if (x->w >= r->n_windows)
            return 1;
    }
    return 0;
}

static inline void rx_take(struct rx *x, uint64_t stamp, uint64_t now)
{
    struct mrun *r = x->r;
    uint64_t lat = now > stamp ? now - stamp : 0;
    r->lat_counts[lp_bucket(lat)]++;
    r->lat_sum += lat;
    if (lat < r->lat_min)
        r->lat_min = lat;
    r->received++;
    if ((r->received & (CPU_EVERY - 1)) == 0)
        read_cpu(&x->cpu, &x->cur.recv_moves);
    x->cur.messages++;
    x->cur.lat_sum += lat;
    if (lat > x->cur.lat_max)
        x->cur.lat_max = lat;
}

/* ---------------------------------------------------------------- the loops */

/* The sender's bookkeeping: its pace and its CPU. */
struct tx {
    uint64_t next;      /* when the next message is due, ticks (paced) */
    int cpu, moves;
};

static inline void tx_cpu(struct mrun *r, struct tx *t)
{
    read_cpu(&t->cpu, &t->moves);
    atomic_store_explicit(&r->send_cpu, t->cpu, memory_order_relaxed);
    atomic_store_explicit(&r->send_moves, t->moves, memory_order_relaxed);
}

/* Wait for the next message's slot (paced); 0 when the run ended meanwhile. */
static inline int tx_pace(struct mrun *r, struct tx *t)
{
    if (!r->period)
        return 1;
    unsigned spins = 0;
    uint64_t now = lp_now(&r->clk);
    if (now < t->next)
        tx_cpu(r, t);
    while (now < t->next) {
        if (atomic_load_explicit(&r->done, memory_order_relaxed))
            return 0;
        lp_backoff(&spins);
        now = lp_now(&r->clk);
    }
    /* held off for more than a period: start the schedule again from now, no burst */
    t->next = now - t->next > r->period ? now + r->period : t->next + r->period;
    return 1;
}

static void send_shm(struct mrun *r, struct tx *t)
{
    struct ring *q = r->ring;
    uint64_t head = 0, tail_seen = 0, sent = 0;
    unsigned spins = 0;
    int slot = 0;       /* the message to send now has had its slot (paced) */
    while (!atomic_load_explicit(&r->done, memory_order_relaxed)) {
        if (!slot) {
            if (!tx_pace(r, t))
                break;
            slot = 1;
            if ((sent & (CPU_EVERY - 1)) == 0)
                tx_cpu(r, t);
        }
        if (head - tail_seen == RING_SLOTS) {
            tail_seen = atomic_load_explicit(&q->tail, memory_order_acquire);
            if (head - tail_seen == RING_SLOTS) {
                lp_backoff(&spins);
                continue;
            }
        }
        struct msg *m = &q->slots[head & (RING_SLOTS - 1)];
        m->seq = head;
        m->stamp = lp_now(&r->clk);
        atomic_store_explicit(&q->head, ++head, memory_order_release);
        sent++;
        spins = 0;
        slot = 0;
    }
    r->sent = sent;
}

static void recv_shm(struct mrun *r, struct rx *x)
{
    struct ring *q = r->ring;
    uint64_t tail = 0, head_seen = 0;
    unsigned spins = 0;
    for (;;) {
        if (tail == head_seen) {
            head_seen = atomic_load_explicit(&q->head, memory_order_acquire);
            if (tail == head_seen) {
                if (rx_advance(x, lp_now(&r->clk)) || atomic_load_explicit(&r->abort_run, memory_order_relaxed))
                    return;
                lp_backoff(&spins);
                continue;
            }
        }
        uint64_t stamp = q->slots[tail & (RING_SLOTS - 1)].stamp;
        atomic_store_explicit(&q->tail, ++tail, memory_order_release);
        uint64_t now = lp_now(&r->clk);
        if (rx_advance(x, now)) {
            r->drained++;       /* taken after the last window closed */
            return;
        }
        rx_take(x, stamp, now);
        spins = 0;
    }
}

/* The sender over a file descriptor: one stamped message per write (pipe) or send (UDP) until `done`;
 * its thread then closes a pipe's end. */
static void send_fd(struct mrun *r, struct tx *t, int udp)
{
    struct msg m;
    memset(&m, 0, sizeof m);
    uint64_t sent = 0;
    while (!atomic_load_explicit(&r->done, memory_order_relaxed)) {
        if (!tx_pace(r, t))
            break;
        if ((sent & (CPU_EVERY - 1)) == 0)
            tx_cpu(r, t);
        m.seq = sent;
        m.stamp = lp_now(&r->clk);
        /* a pipe: 64 bytes <= PIPE_BUF, so the write is atomic and messages never interleave or split */
        ssize_t n = udp ? send(r->udp_s, &m, sizeof m, 0) : write(r->pipe_w, &m, sizeof m);
        if (n == (ssize_t)sizeof m)
            sent++;
        else if (!udp && n < 0 && errno != EINTR)
            break;
        /* UDP: ENOBUFS and the like: the datagram is lost, as a real sender's would be; go on */
    }
    r->sent = sent;
}


static void recv_pipe(struct mrun *r, struct rx *x)
{
    struct msg buf[PIPE_READ_MSGS];
    int stopping = 0;
    for (;;) {
        ssize_t n = read(r->pipe_r, buf, sizeof buf);
        if (n == 0)
            return;                     /* the sender has closed its end */
        if (n < 0) {
            if (errno == EINTR)
                continue;
            atomic_store(&r->done, 1);
            return;
        }
        if (stopping) {
            /* draining, so a sender blocked in write() can see `done`; a write is 64 bytes, atomic
             * (<= PIPE_BUF), so the pipe holds whole messages */
            r->drained += (uint64_t)n / sizeof buf[0];
            continue;
        }
        uint64_t now = lp_now(&r->clk);
        if (rx_advance(x, now)) {
            atomic_store(&r->done, 1);
            stopping = 1;
            r->drained += (uint64_t)n / sizeof buf[0];
            continue;
        }
        for (ssize_t i = 0; i < n / (ssize_t)sizeof buf[0]; i++)
            rx_take(x, buf[i].stamp, now);
    }
}


static void recv_udp(struct mrun *r, struct rx *x)
{
    struct msg m;
    for (;;) {
        ssize_t n = recv(r->udp_r, &m, sizeof m, 0);
        uint64_t now = lp_now(&r->clk);
        if (rx_advance(x, now)) {
            r->drained += n == (ssize_t)sizeof m;
            return;
        }
        if (n == (ssize_t)sizeof m)
            rx_take(x, m.stamp, now);
        else if ((n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) ||
                 atomic_load_explicit(&r->abort_run, memory_order_relaxed))
            return;
    }
}

/* After the last window: wait for the sender to stop, then count what is still on the way (the pipe's
 * receiver reads it to end-of-file itself). */
static void drain(struct mrun *r)
{
    unsigned spins = 0;
    while (!atomic_load(&r->sender_stopped))
        lp_backoff(&spins);
    if (r->transport == T_SHM) {
        r->drained += atomic_load(&r->ring->head) - atomic_load(&r->ring->tail);
    } else if (r->transport == T_UDP) {
        struct msg m;
        struct pollfd p = {r->udp_r, POLLIN, 0};
        while (poll(&p, 1, UDP_DRAIN_MS) == 1)
            while (recv(r->udp_r, &m, sizeof m, MSG_DONTWAIT) == (ssize_t)sizeof m)
                r->drained++;
    }
}

/* ---------------------------------------------------------------- threads */

struct role {
    struct mrun *r;
    int which;          /* 0 sender, 1 receiver */
};

static void *messaging_thread(void *arg)
{
    struct role *role = arg;
    struct mrun *r = role->r;
    int me = role->which;
    r->tids[me] = lp_gettid();
    if (r->given[me] && sched_setaffinity(0, sizeof r->sets[me], &r->sets[me]) != 0)
        r->pin_err[me] = errno;
    lp_latch_add(&r->ready, 1);
    lp_latch_wait(&r->go, 1);
    int run = !atomic_load(&r->abort_run);
    if (me == 0) {
        struct tx t = {0, -1, 0};
        if (run && r->transport == T_SHM)
            send_shm(r, &t);
        else if (run)
            send_fd(r, &t, r->transport == T_UDP);
        if (r->pipe_w >= 0 && r->transport == T_PIPE) {
            close(r->pipe_w);           /* the receiver drains the pipe until it reads end-of-file */
            r->pipe_w = -1;
        }
        atomic_store(&r->sender_stopped, 1);
    } else {
        struct rx x = {r, 0, r->t_go + r->interval, {0, 0, 0, -1, -1, 0, 0}, -1, 0};
        if (run && r->transport == T_SHM)
            recv_shm(r, &x);
        else if (run && r->transport == T_PIPE)
            recv_pipe(r, &x);
        else if (run)
            recv_udp(r, &x);
        r->t_end = lp_now(&r->clk);
        atomic_store(&r->done, 1);
        if (run)
            drain(r);
        if (r->transport == T_PIPE && !run) {
            char sink[256];
            while (read(r->pipe_r, sink, sizeof sink) > 0)
                ;
        }
        pthread_mutex_lock(&r->windows.m);
        r->recv_ended = 1;
        pthread_cond_broadcast(&r->windows.c);
        pthread_mutex_unlock(&r->windows.m);
    }
    lp_latch_add(&r->stopped, 1);
    lp_latch_wait(&r->release, 1);
    free(role);
    return NULL;
}

/* ---------------------------------------------------------------- transports */

static int udp_pair(struct mrun *r, int multicast, char *why, size_t why_len)
{
    r->udp_r = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    r->udp_s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (r->udp_r < 0 || r->udp_s < 0)
        goto fail;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = inet_addr(multicast ? UDP_GROUP : "127.0.0.1");
    if (bind(r->udp_r, (struct sockaddr *)&a, sizeof a) != 0)
        goto fail;
    socklen_t alen = sizeof a;
    if (getsockname(r->udp_r, (struct sockaddr *)&a, &alen) != 0)
        goto fail;
    if (multicast) {
        /* lo carries no MULTICAST flag, yet Linux delivers a group joined on 127.0.0.1 and sent
         * through IP_MULTICAST_IF 127.0.0.1 with IP_MULTICAST_LOOP (checked below by a handshake) */
        struct ip_mreq mreq;
        mreq.imr_multiaddr.s_addr = inet_addr(UDP_GROUP);
        mreq.imr_interface.s_addr = inet_addr("127.0.0.1");
        struct in_addr ifa;
        ifa.s_addr = inet_addr("127.0.0.1");
        unsigned char loop = 1;
        if (setsockopt(r->udp_r, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mreq, sizeof mreq) != 0 ||
            setsockopt(r->udp_s, IPPROTO_IP, IP_MULTICAST_IF, &ifa, sizeof ifa) != 0 ||
            setsockopt(r->udp_s, IPPROTO_IP, IP_MULTICAST_LOOP, &loop, sizeof loop) != 0)
            goto fail;
    }
    if (connect(r->udp_s, (struct sockaddr *)&a, sizeof a) != 0)
        goto fail;
    /* one datagram through, or the kernel does not deliver this way here */
    struct msg m;
    memset(&m, 0, sizeof m);
    if (send(r->udp_s, &m, sizeof m, 0) != (ssize_t)sizeof m)
        goto fail;
    struct pollfd p = {r->udp_r, POLLIN, 0};
    if (poll(&p, 1, UDP_HANDSHAKE_MS) != 1) {
        snprintf(why, why_len, "a datagram sent to %s did not arrive within %d ms",
                 multicast ? UDP_GROUP : "127.0.0.1", UDP_HANDSHAKE_MS);
        errno = 0;
        goto fail_quiet;
    }
    (void)!recv(r->udp_r, &m, sizeof m, 0);
    struct timeval tv = {0, UDP_RCV_TIMEOUT_US};
    if (setsockopt(r->udp_r, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0)
        goto fail;
    snprintf(r->udp_mode, sizeof r->udp_mode, "%s %s:%u on lo", multicast ? "multicast" : "unicast",
             multicast ? UDP_GROUP : "127.0.0.1", (unsigned)ntohs(a.sin_port));
    return 0;
fail:
    snprintf(why, why_len, "%s", strerror(errno));
fail_quiet:
    if (r->udp_r >= 0)
        close(r->udp_r);
    if (r->udp_s >= 0)
        close(r->udp_s);
    r->udp_r = r->udp_s = -1;
    return -1;
}

static int open_transport(struct mrun *r, int multicast)
{
    if (r->transport == T_SHM) {
        /* shared memory, as two processes would map it (the two threads would share any memory);
         * populated now, so no page fault lands in the measured windows */
        void *p = mmap(NULL, sizeof(struct ring), PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (p == MAP_FAILED)
            return -1;
        r->ring = p;
        return 0;
    }
    if (r->transport == T_PIPE) {
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) != 0)
            return -1;
        r->pipe_r = fds[0];
        r->pipe_w = fds[1];
        return 0;
    }
    char why[128] = "";
    if (multicast && udp_pair(r, 1, why, sizeof why) == 0)
        return 0;
    char mwhy[128];
    snprintf(mwhy, sizeof mwhy, "%s", why);
    if (udp_pair(r, 0, why, sizeof why) != 0)
        return -1;
    if (multicast) {
        size_t n = strlen(r->udp_mode);
        snprintf(r->udp_mode + n, sizeof r->udp_mode - n, " (multicast refused: %s)", mwhy);
    }
    return 0;
}

static void close_transport(struct mrun *r)
{
    if (r->ring)
        munmap(r->ring, sizeof(struct ring));
    r->ring = NULL;
    for (int *fd = &r->pipe_r; fd <= &r->udp_s; fd++) {
        if (*fd >= 0)
            close(*fd);
        *fd = -1;
    }
}

/* ---------------------------------------------------------------- lifecycle */

#define CAPSULE "coremap.messaging"

static void release_run(struct lp_run *h)
{
    struct mrun *r = (struct mrun *)h;
    if (r->nthreads) {
        /* stopped early (an exception, Cancel): make both loops end, then let them go */
        atomic_store(&r->abort_run, 1);
        atomic_store(&r->done, 1);
        lp_latch_add(&r->go, 1);
        lp_latch_add(&r->release, 1);
        for (int i = 0; i < r->nthreads; i++)
            pthread_join(r->threads[i], NULL);
    }
    close_transport(r);
    free(r->win);
    r->win = NULL;
    lp_latch_destroy(&r->ready);
    lp_latch_destroy(&r->go);
    lp_latch_destroy(&r->windows);
    lp_latch_destroy(&r->stopped);
    lp_latch_destroy(&r->release);
}

static struct mrun *run_of(PyObject *cap)
{
    return (struct mrun *)lp_run_of(cap, CAPSULE, 0);
}

static PyObject *py_messaging_start(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"transport", "send_cpus", "recv_cpus", "interval_ns", "windows", "tsc_hz",
                             "multicast", "rate", NULL};
    const char *transport;
    PyObject *send_cpus, *recv_cpus;
    unsigned long long interval_ns;
    long n_windows;
    double tsc_hz, rate = 0.0;
    int multicast = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sOOKld|pd", kwlist, &transport, &send_cpus, &recv_cpus,
                                     &interval_ns, &n_windows, &tsc_hz, &multicast, &rate))
        return NULL;
    if (!(rate >= 0.0 && rate <= 1e9)) {
        PyErr_SetString(PyExc_ValueError, "rate is messages per second, 0 (as fast as it can) to 1e9");
        return NULL;
    }
    int t = -1;
    for (int i = 0; i < 3; i++)
        if (strcmp(transport, TRANSPORTS[i]) == 0)
            t = i;
    if (t < 0 || n_windows < 1 || interval_ns < 1000) {
        PyErr_SetString(PyExc_ValueError, "transport is shm, pipe or udp; windows >= 1; interval >= 1 us");
        return NULL;
    }
    struct mrun *r = calloc(1, sizeof *r);
    if (!r)
        return PyErr_NoMemory();
    r->transport = t;
    r->pipe_r = r->pipe_w = r->udp_r = r->udp_s = -1;
    lp_clock_init(&r->clk, tsc_hz);
    r->interval = (uint64_t)((double)interval_ns / r->clk.ns_per_tick);
    r->period = rate > 0 ? (uint64_t)(1e9 / rate / r->clk.ns_per_tick) : 0;
    if (rate > 0 && r->period == 0)
        r->period = 1;
    atomic_store(&r->send_cpu, -1);
    r->n_windows = n_windows;
    r->lat_min = UINT64_MAX;
    lp_latch_init(&r->ready);
    lp_latch_init(&r->go);
    lp_latch_init(&r->windows);
    lp_latch_init(&r->stopped);
    lp_latch_init(&r->release);
    r->head = (struct lp_run){"messaging run", release_run, 0};
    PyObject *cap = lp_capsule(&r->head, CAPSULE);
    if (!cap)
        return NULL;
    if (lp_cpuset(send_cpus, &r->sets[0], &r->given[0]) < 0 || lp_cpuset(recv_cpus, &r->sets[1], &r->given[1]) < 0) {
        Py_DECREF(cap);
        return NULL;
    }
    r->win = calloc((size_t)n_windows, sizeof *r->win);
    if (!r->win) {
        Py_DECREF(cap);
        return PyErr_NoMemory();
    }
    int err = 0;
    Py_BEGIN_ALLOW_THREADS
    if (open_transport(r, multicast) != 0)
        err = errno ? errno : EIO;
    for (int i = 0; i < 2 && !err; i++) {
        struct role *role = malloc(sizeof *role);
        if (!role) {
            err = ENOMEM;
            break;
        }
        role->r = r;
        role->which = i;
        if ((err = pthread_create(&r->threads[i], NULL, messaging_thread, role)) != 0) {
            free(role);
            break;
        }
        r->nthreads++;
    }
    if (!err)
        lp_latch_wait(&r->ready, 2);
    Py_END_ALLOW_THREADS
    if (!err)
        err = r->pin_err[0] ? r->pin_err[0] : r->pin_err[1];
    if (err) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        Py_DECREF(cap);     /* the destructor stops and joins what started */
        return NULL;
    }
    return cap;
}

static PyObject *py_messaging_info(PyObject *self, PyObject *cap)
{
    struct mrun *r = run_of(cap);
    if (!r)
        return NULL;
    return Py_BuildValue("{s:i,s:i,s:s,s:i,s:i,s:O}", "send_tid", (int)r->tids[0], "recv_tid", (int)r->tids[1],
                         "udp", r->udp_mode, "message_bytes", MSG_BYTES, "ring_slots", RING_SLOTS,
                         "tsc", r->clk.tsc ? Py_True : Py_False);
}

static PyObject *py_messaging_go(PyObject *self, PyObject *cap)
{
    struct mrun *r = run_of(cap);
    if (!r)
        return NULL;
    r->t_go = lp_now(&r->clk);
    lp_latch_add(&r->go, 1);
    Py_RETURN_NONE;
}

static PyObject *py_messaging_windows(PyObject *self, PyObject *args)
{
    PyObject *cap;
    long have;
    if (!PyArg_ParseTuple(args, "Ol", &cap, &have))
        return NULL;
    struct mrun *r = run_of(cap);
    if (!r)
        return NULL;
    long count;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&r->windows.m);
    while (r->windows.count <= have && !r->recv_ended)
        pthread_cond_wait(&r->windows.c, &r->windows.m);
    count = r->windows.count;
    pthread_mutex_unlock(&r->windows.m);
    Py_END_ALLOW_THREADS
    PyObject *out = PyList_New(0);
    for (long i = have; out && i < count && i < r->n_windows; i++) {
        struct window *w = &r->win[i];
        PyObject *d = Py_BuildValue("{s:l,s:K,s:d,s:d,s:[ii],s:[ii]}", "index", i,
                                    "messages", (unsigned long long)w->messages,
                                    "mean_latency_ns", w->messages ? lp_ns(&r->clk, w->lat_sum) / (double)w->messages : 0.0,
                                    "max_latency_ns", lp_ns(&r->clk, w->lat_max),
                                    "cpus", w->send_cpu, w->recv_cpu, "moves", w->send_moves, w->recv_moves);
        if (!d || PyList_Append(out, d) < 0) {
            Py_XDECREF(d);
            Py_CLEAR(out);
        } else {
            Py_DECREF(d);
        }
    }
    return out;
}

static PyObject *py_messaging_stop(PyObject *self, PyObject *cap)
{
    struct mrun *r = run_of(cap);
    if (!r)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    atomic_store(&r->done, 1);
    lp_latch_wait(&r->stopped, r->nthreads);
    Py_END_ALLOW_THREADS
    PyObject *buckets = lp_buckets_list(r->lat_counts, r->clk.ns_per_tick);
    if (!buckets)
        return NULL;
    /* the largest latency is the largest of the windows' (the loop keeps one maximum, not two) */
    for (long i = 0; i < r->n_windows; i++)
        if (r->win[i].lat_max > r->lat_max)
            r->lat_max = r->win[i].lat_max;
    return Py_BuildValue("{s:K,s:K,s:K,s:d,s:N,s:d,s:d,s:d}", "sent", (unsigned long long)r->sent,
                         "received", (unsigned long long)r->received, "drained", (unsigned long long)r->drained,
                         "elapsed_ns", lp_ns(&r->clk, r->t_end - r->t_go), "buckets", buckets,
                         "min_ns", r->received ? lp_ns(&r->clk, r->lat_min) : 0.0,
                         "max_ns", lp_ns(&r->clk, r->lat_max),
                         "mean_ns", r->received ? lp_ns(&r->clk, r->lat_sum) / (double)r->received : 0.0);
}

static PyObject *py_messaging_release(PyObject *self, PyObject *cap)
{
    /* after messaging_stop both threads wait to be let go; before it (an exception on the way),
     * release_run ends their loops now rather than at the last window */
    return lp_release_capsule(cap, CAPSULE);
}

LP_METHODS(messaging,
    {"messaging_start", (PyCFunction)(void (*)(void))py_messaging_start, METH_VARARGS | METH_KEYWORDS,
     "messaging_start(transport, send_cpus, recv_cpus, interval_ns, windows, tsc_hz, multicast=True, rate=0) -> "
     "run: a sender and a receiver thread over shm|pipe|udp, each pinned to its CPU list (None: unpinned), "
     "ready and waiting for messaging_go; the sender paced at `rate` messages per second (0: as fast as it "
     "can). tsc_hz 0 reads CLOCK_MONOTONIC."},
    {"messaging_info", py_messaging_info, METH_O,
     "messaging_info(run) -> {send_tid, recv_tid, udp, message_bytes, ring_slots, tsc}"},
    {"messaging_go", py_messaging_go, METH_O, "messaging_go(run): start sending; windows count from now."},
    {"messaging_windows", py_messaging_windows, METH_VARARGS,
     "messaging_windows(run, have) -> [{index, messages, mean_latency_ns, max_latency_ns, cpus, moves}]: the "
     "windows closed after the first `have`, waiting for at least one; [] once the receiver has ended. cpus: "
     "[sender, receiver] when last read; moves: changes of CPU seen (sampled)."},
    {"messaging_stop", py_messaging_stop, METH_O,
     "messaging_stop(run) -> {sent, received, drained, elapsed_ns, buckets, min_ns, max_ns, mean_ns}: wait "
     "for both threads to stop (they stay, parked, until messaging_release); drained: what arrived after "
     "the last window (on the way, not lost)."},
    {"messaging_release", py_messaging_release, METH_O,
     "messaging_release(run): let the threads exit, join them, close the transport."});
