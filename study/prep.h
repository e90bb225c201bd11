/*
 * prep.h - what a run's policy makes from its trace alone
 * (gm_policy_ops.prepare: the oracle's future, ~10 % of its run), made by
 * a job of its own beside a study's other runs and given to the run
 * (gm_sim_config.policy_prep). compare's two threads then split the work
 * closer to evenly: its oracle run no longer makes it on the thread that
 * also runs the shared pytorch run (bench/README.md, "Twenty-sixth round").
 *
 * Whichever comes first makes it: the job, or the run, whose policy then
 * makes its own as it would have; a run that finds the job making it
 * waits for it. So no order of the jobs can deadlock, and the results are
 * the same with a preparation and without: the run's attach takes what it
 * would have made (tests/test_compare.c holds compare to that).
 */
#ifndef GM_PREP_H
#define GM_PREP_H

#include <stddef.h>

#include "sim/engine.h"

typedef struct gm_prep gm_prep;

/* 1 when tenant i of a run of cfg (whose policy is cfg->policy) has one
 * to make: its policy prepares and its trace is in memory; *share: the
 * part of the run's time it takes (gm_policy_ops.prepare_share). */
int gm_prep_wanted(const gm_sim_config *cfg, size_t i, double *share);
/* A preparation for tenant i of a run of cfg (copied; what it points at
 * must outlive the preparation); NULL when out of memory (the run then
 * makes its own). */
gm_prep *gm_prep_new(const gm_sim_config *cfg, size_t i);
/* The job: make it, unless the run has taken it already. An error leaves
 * nothing made: the run's policy then makes its own and says what failed. */
void gm_prep_make(gm_prep *p);
/* What the run's configuration points at (policy_prep[i]). */
gm_policy_prep *gm_prep_handle(gm_prep *p);
void gm_prep_free(gm_prep *p);

#endif
