/*
 * trace_check.c - print a one-line summary of a trace for the injection test:
 * reading every event through the reader also checks order and sizes.
 */
#include <stdio.h>
#include <stdlib.h>

#include "traces/trace.h"

int main(int argc, char **argv)
{
    gm_trace_reader *r = NULL;
    gm_err e = {0};
    if (argc != 2) {
        fprintf(stderr, "usage: trace_check TRACE.h5\n");
        return 2;
    }
    if (gm_trace_open(argv[1], &r, &e) != GM_OK) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    gm_event ev[256];
    unsigned long long nev = 0, alloc = 0, fre = 0, phase[GM_PHASE_COUNT] = {0};
    int64_t n;
    while ((n = gm_trace_read(r, ev, 256, &e)) > 0) {
        for (int64_t i = 0; i < n; i++) {
            nev++;
            alloc += ev[i].op == GM_OP_ALLOC;
            fre += ev[i].op == GM_OP_FREE;
            if (ev[i].phase < GM_PHASE_COUNT) phase[ev[i].phase]++;
        }
    }
    gm_marker *mk = NULL;
    gm_init_row *init = NULL;
    size_t nmk = 0, ninit = 0;
    if (n < 0 || gm_trace_read_markers(r, &mk, &nmk, &e) != GM_OK ||
        gm_trace_read_initial(r, &init, &ninit, &e) != GM_OK) {
        fprintf(stderr, "%s\n", e.msg);
        gm_trace_close(r);
        return 1;
    }
    const gm_trace_meta *m = gm_trace_meta_get(r);
    size_t iters = 0;
    for (size_t i = 0; i < nmk; i++)
        iters += mk[i].kind == GM_MARK_ITERATION;
    printf("events=%llu allocs=%llu frees=%llu markers=%zu iterations=%zu initial=%zu "
           "dropped=%llu phases=%llu/%llu/%llu/%llu source=%s device=%s total=%llu\n",
           nev, alloc, fre, nmk, iters, ninit, (unsigned long long)m->dropped_records, phase[0],
           phase[1], phase[2], phase[3], m->source, m->device_name,
           (unsigned long long)m->device_total_bytes);
    printf("command=%s\nworkload=%s\n", m->command, m->workload);
    free(mk);
    free(init);
    gm_trace_close(r);
    return 0;
}
