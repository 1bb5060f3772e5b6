/* workload: a user's command for bench_probes_scaling whose counts do not depend on where its threads
 * run: THREADS threads, each touching PAGES fresh pages (a page fault each) and then SLEEPS times
 * sleeping 20 us (a context switch each) and computing ~10 us (task-clock).
 *
 *   workload THREADS PAGES SLEEPS
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static long pages, sleeps;

static void *worker(void *arg)
{
    volatile uint32_t x = (uint32_t)(uintptr_t)arg + 1;
    char *p = malloc((size_t)pages * 4096);
    for (long i = 0; i < pages; i++)
        p[i * 4096] = 1;
    struct timespec t = {0, 20000};
    for (long i = 0; i < sleeps; i++) {
        nanosleep(&t, NULL);
        for (int j = 0; j < 20000; j++)
            x = x * 1664525u + 1013904223u;
    }
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    int n = atoi(argv[1]);
    pages = atol(argv[2]);
    sleeps = atol(argv[3]);
    pthread_t t[64];
    for (long i = 0; i < n && i < 64; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (long i = 0; i < n && i < 64; i++)
        pthread_join(t[i], NULL);
    return 0;
}
