/*
 * progress.c - progress on stderr for the commands that simulate (run,
 * compare, fit, tune): shown when stderr is a terminal and the command is
 * not -q, or always with --progress; never with --no-progress. Nothing is
 * printed in the first second (GMSIM_PROGRESS_AFTER=SECONDS changes that,
 * for tests), so quick commands stay quiet; after that
 * `run` shows the events simulated, compare and fit one line per finished
 * policy or bisection step, tune a counter of the settings simulated.
 *
 * One command per process: the state is the executable's own (like the
 * temporary files of inputs.c), not a library's.
 */
#include "cli.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"

static int mode = -1; /* --progress 1, --no-progress 0, unset -1 */
static struct {
    const char *cmd;
    int overwrite; /* one line rewritten in place (\r), else line by line */
    int shown;     /* something is on the line that end() must clear      */
    double t0, after;
    uint64_t total_events;
    pthread_mutex_t mu;
} st = {.mu = PTHREAD_MUTEX_INITIALIZER};

void gm_cli_progress_set(int on)
{
    mode = on;
}

static void say(const char *line)
{
    pthread_mutex_lock(&st.mu);
    if (gm_monotonic_s() - st.t0 >= st.after) { /* quiet for the first second */
        if (st.overwrite)
            fprintf(stderr, "\rgmsim %s: %s\033[K", st.cmd, line);
        else
            fprintf(stderr, "gmsim %s: %s\n", st.cmd, line);
        st.shown = st.overwrite;
    }
    pthread_mutex_unlock(&st.mu);
}

static void on_step(void *ctx, const char *line)
{
    (void)ctx;
    say(line);
}

static void on_events(void *ctx, uint64_t done)
{
    (void)ctx;
    char line[96];
    if (st.total_events)
        snprintf(line, sizeof line, "%.1f M of %.1f M events (%.0f %%)", (double)done / 1e6,
                 (double)st.total_events / 1e6, 100.0 * (double)done / (double)st.total_events);
    else
        snprintf(line, sizeof line, "%.1f M events", (double)done / 1e6);
    say(line);
}

int gm_cli_progress_begin(const char *cmd, int quiet, gm_sim_config *cfg, int overwrite)
{
    int on = mode >= 0 ? mode : !quiet && isatty(2);
    if (!on) return 0;
    st.cmd = cmd;
    st.overwrite = overwrite;
    st.shown = 0;
    st.t0 = gm_monotonic_s();
    const char *after = getenv("GMSIM_PROGRESS_AFTER");
    char *end;
    st.after = after && *after ? strtod(after, &end) : 1.0;
    if (!after || !*after || *end || !(st.after >= 0)) st.after = 1.0;
    st.total_events = 0;
    for (size_t i = 0; i < cfg->n_tenants; i++) /* in-memory ones know their length */
        st.total_events +=
            cfg->tenants[i].n_events * (cfg->tenants[i].repeat ? cfg->tenants[i].repeat : 1);
    if (!strcmp(cmd, "run")) {
        cfg->progress = on_events;
        cfg->progress_ctx = NULL;
    }
    cfg->step_done = on_step;
    cfg->step_ctx = NULL;
    return 1;
}

void gm_cli_progress_end(void)
{
    pthread_mutex_lock(&st.mu);
    if (st.shown) fprintf(stderr, "\r\033[K");
    st.shown = 0;
    pthread_mutex_unlock(&st.mu);
}
