/* The program bench/watch_overhead.sh watches: sleeps to absolute CLOCK_MONOTONIC
 * deadlines PERIOD_US apart for SECONDS and prints its own lateness (deadline to
 * running, ns) as "n p50 p99 max". Usage: watch_sleeper SECONDS PERIOD_US [fifo|other] */
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 3) return fprintf(stderr, "usage: %s SECONDS PERIOD_US [fifo|other]\n", argv[0]), 2;
    uint64_t period = strtoull(argv[2], 0, 10) * 1000, secs = strtoull(argv[1], 0, 10);
    size_t cap = secs * 1000000000u / period, n = 0;
    uint64_t *late = malloc(cap * sizeof *late);
    if (argc < 4 || strcmp(argv[3], "other")) {
        struct sched_param p = {.sched_priority = 1};
        if (sched_setscheduler(0, SCHED_FIFO, &p)) return perror("SCHED_FIFO"), 1;
    }
    /* The default 50 µs of slack would be counted as lateness. */
    prctl(PR_SET_TIMERSLACK, 1);
    uint64_t next = now_ns();
    while (n < cap) {
        next += period;
        struct timespec t = {.tv_sec = next / 1000000000u, .tv_nsec = next % 1000000000u};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, 0);
        uint64_t ran = now_ns();
        late[n++] = ran - next;
        /* A deadline missed by more than a period is skipped, not caught up. */
        while (next + period < ran) next += period;
    }
    qsort(late, n, sizeof *late, cmp);
    printf("%zu %lu %lu %lu\n", n, late[n / 2], late[(n - 1) * 99 / 100], late[n - 1]);
    return 0;
}
