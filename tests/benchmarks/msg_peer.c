/* msg_peer: the messaging probe's transfer written as a plain C program, outside coremap: the peer of
 * tests/benchmarks/bench_probes_messaging.py. A sender thread and a receiver thread, each pinned to its
 * CPU, exchange 64-byte messages stamped with rdtsc as fast as they can over a 1,024-slot SPSC ring
 * in shared memory, a pipe (one message per write, up to 64 per read) or UDP on loopback (unicast);
 * the receiver counts messages into 100 ms windows from a common start and records each message's
 * one-way latency as the probe does (log buckets, 8 per power of two; a sum, a minimum; per window a
 * count, a sum and a maximum).
 *
 *   msg_peer shm|pipe|udp SEND_CPU RECV_CPU WINDOWS TSC_HZ
 *
 * prints one line: the messages of each window, space-separated.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <x86intrin.h>

#define SLOTS 1024

struct msg { uint64_t stamp, seq; unsigned char body[48]; };
struct ring {
    _Alignas(128) _Atomic uint64_t head;
    _Alignas(128) _Atomic uint64_t tail;
    _Alignas(128) struct msg slots[SLOTS];
};

static const char *transport;
static int send_cpu, recv_cpu, pipe_fd[2], udp_r, udp_s;
static long windows;
static uint64_t window_ticks, t_go;
static struct ring *ring;
static _Atomic int done, ready;
static uint64_t *counts, *win_sum, *win_max, buckets[64 * 8], lat_sum, lat_min = UINT64_MAX;

static inline unsigned bucket(uint64_t v)
{
    if (v < 8)
        return (unsigned)v;
    unsigned e = 63u - (unsigned)__builtin_clzll(v);
    return (e - 2) * 8 + ((unsigned)(v >> (e - 3)) & 7);
}

static void pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (sched_setaffinity(0, sizeof s, &s) != 0) {
        perror("sched_setaffinity");
        exit(2);
    }
}

static void wait_a_little(unsigned *spins)
{
    if (++*spins < 256) {
        _mm_pause();
    } else {
        *spins = 0;
        sched_yield();
    }
}

static void *sender(void *arg)
{
    (void)arg;
    pin(send_cpu);
    atomic_fetch_add(&ready, 1);
    while (atomic_load(&ready) < 3)
        ;
    struct msg m = {0};
    uint64_t head = 0, tail_seen = 0;
    unsigned spins = 0;
    while (!atomic_load_explicit(&done, memory_order_relaxed)) {
        if (transport[0] == 's') {
            if (head - tail_seen == SLOTS) {
                tail_seen = atomic_load_explicit(&ring->tail, memory_order_acquire);
                if (head - tail_seen == SLOTS) {
                    wait_a_little(&spins);
                    continue;
                }
            }
            struct msg *slot = &ring->slots[head & (SLOTS - 1)];
            slot->seq = head;
            slot->stamp = __rdtsc();
            atomic_store_explicit(&ring->head, ++head, memory_order_release);
            spins = 0;
        } else {
            m.seq = head++;
            m.stamp = __rdtsc();
            if (transport[0] == 'p')
                (void)!write(pipe_fd[1], &m, sizeof m);
            else
                (void)!send(udp_s, &m, sizeof m, 0);
        }
    }
    if (transport[0] == 'p')
        close(pipe_fd[1]);
    return NULL;
}

static long w;              /* the open window, ending at w_end (ticks) */
static uint64_t w_end;

/* move past the windows that ended before `now`; 1 after the last */
static inline int advance(uint64_t now)
{
    while (now >= w_end) {
        w_end += window_ticks;
        if (++w >= windows)
            return 1;
    }
    return 0;
}

/* a message stamped `stamp` taken at `now` (ticks): its window, its latency; 1 after the last window */
static inline int take(uint64_t now, uint64_t stamp)
{
    if (advance(now))
        return 1;
    uint64_t lat = now > stamp ? now - stamp : 0;
    buckets[bucket(lat)]++;
    lat_sum += lat;
    if (lat < lat_min)
        lat_min = lat;
    counts[w]++;
    win_sum[w] += lat;
    if (lat > win_max[w])
        win_max[w] = lat;
    return 0;
}

static void *receiver(void *arg)
{
    (void)arg;
    pin(recv_cpu);
    atomic_fetch_add(&ready, 1);
    while (atomic_load(&ready) < 3)
        ;
    uint64_t tail = 0, head_seen = 0;
    unsigned spins = 0;
    struct msg buf[64];
    for (;;) {
        if (transport[0] == 's') {
            if (tail == head_seen) {
                head_seen = atomic_load_explicit(&ring->head, memory_order_acquire);
                if (tail == head_seen) {
                    if (advance(__rdtsc()))
                        break;
                    wait_a_little(&spins);
                    continue;
                }
            }
            uint64_t stamp = ring->slots[tail & (SLOTS - 1)].stamp;
            atomic_store_explicit(&ring->tail, ++tail, memory_order_release);
            if (take(__rdtsc(), stamp))
                break;
            spins = 0;
        } else if (transport[0] == 'p') {
            ssize_t n = read(pipe_fd[0], buf, sizeof buf);
            if (n <= 0)
                break;
            uint64_t now = __rdtsc(), k = (uint64_t)n / sizeof buf[0];
            int end = 0;
            for (uint64_t i = 0; i < k && !end; i++)
                end = take(now, buf[i].stamp);
            if (end)
                break;
        } else {
            ssize_t n = recv(udp_r, buf, sizeof buf[0], 0);
            uint64_t now = __rdtsc();
            if (advance(now))
                break;
            if (n == (ssize_t)sizeof buf[0] && take(now, buf[0].stamp))
                break;
        }
    }
    atomic_store(&done, 1);
    if (transport[0] == 'p')
        while (read(pipe_fd[0], buf, sizeof buf) > 0)
            ;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: msg_peer shm|pipe|udp SEND_CPU RECV_CPU WINDOWS TSC_HZ\n");
        return 2;
    }
    transport = argv[1];
    send_cpu = atoi(argv[2]);
    recv_cpu = atoi(argv[3]);
    windows = atol(argv[4]);
    window_ticks = (uint64_t)(atof(argv[5]) / 10.0);
    counts = calloc((size_t)windows, sizeof *counts);
    win_sum = calloc((size_t)windows, sizeof *win_sum);
    win_max = calloc((size_t)windows, sizeof *win_max);
    signal(SIGPIPE, SIG_IGN);
    if (transport[0] == 's') {
        ring = mmap(NULL, sizeof *ring, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    } else if (transport[0] == 'p') {
        if (pipe(pipe_fd) != 0)
            return 2;
    } else {
        struct sockaddr_in a = {.sin_family = AF_INET};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        udp_r = socket(AF_INET, SOCK_DGRAM, 0);
        udp_s = socket(AF_INET, SOCK_DGRAM, 0);
        struct timeval tv = {0, 10000};
        if (bind(udp_r, (struct sockaddr *)&a, sizeof a) || getsockname(udp_r, (struct sockaddr *)&a, &len) ||
            connect(udp_s, (struct sockaddr *)&a, sizeof a) ||
            setsockopt(udp_r, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv))
            return 2;
    }
    pthread_t s, r;
    pthread_create(&r, NULL, receiver, NULL);
    pthread_create(&s, NULL, sender, NULL);
    while (atomic_load(&ready) < 2)
        ;
    t_go = __rdtsc();
    w_end = t_go + window_ticks;
    atomic_fetch_add(&ready, 1);
    pthread_join(s, NULL);
    pthread_join(r, NULL);
    for (long w = 0; w < windows; w++)
        printf("%s%llu", w ? " " : "", (unsigned long long)counts[w]);
    printf("\n");
    return 0;
}
