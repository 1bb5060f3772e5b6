/* lock_peer: a user's program for bench_probes_scaling: THREADS threads doing OPS operations in all,
 * each a little arithmetic and an update of shared data under one pthread mutex, plus 2,000 fresh
 * pages touched at start (page faults to count).
 *
 *   lock_peer THREADS OPS
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static uint64_t shared[4][8];
static _Atomic uint64_t next;
static uint64_t ops;

static void *worker(void *arg)
{
    uint64_t x = (uintptr_t)arg * 7919 + 1, start;
    while ((start = atomic_fetch_add(&next, 256)) < ops) {
        for (int k = 0; k < 256 && start + k < ops; k++) {
            for (int r = 0; r < 8; r++) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
            }
            pthread_mutex_lock(&m);
            for (int l = 0; l < 4; l++)
                shared[l][l] += x >> l;
            pthread_mutex_unlock(&m);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int n = atoi(argv[1]);
    ops = strtoull(argv[2], NULL, 10);
    char *pages = malloc(2000 * 4096);
    for (int i = 0; i < 2000; i++)
        pages[i * 4096] = 1;
    pthread_t t[64];
    for (long i = 0; i < n && i < 64; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (long i = 0; i < n && i < 64; i++)
        pthread_join(t[i], NULL);
    return pages[4096] == 1 ? 0 : 1;
}
