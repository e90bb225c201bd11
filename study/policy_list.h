/*
 * policy_list.h - the list of policies compare and fit run (--policies):
 * split into specs, each name checked against the registry.
 */
#ifndef GM_POLICY_LIST_H
#define GM_POLICY_LIST_H

#include <stddef.h>

#include "base/err.h"

/* Split "--policies" into specs. Specs are separated by ',' and a piece
 * that has '=' but no ':' continues the previous spec's parameters:
 * "lru:threshold=0.8,priority" -> {"lru:threshold=0.8", "priority"},
 * "predictive:horizon=20ms,sample=1ms,oracle" -> 2 specs. Empty or NULL
 * list: every registered policy. Each name is checked. *specs is one
 * allocation (free() it). */
int gm_policy_list_split(const char *list, char ***specs, size_t *n, gm_err *err);

/* Append one --policies value to the running list buf (cap bytes), for a
 * command line that gives --policies several times. GM_EUSAGE on error. */
int gm_policies_append(char *buf, size_t cap, const char *arg, gm_err *err);

/* 0 when spec names an unrealizable policy (the oracle), else 1. */
int gm_policy_spec_realizable(const char *spec);
/* What a simulation with spec's policy takes relative to one with
 * `pytorch` (gm_policy_ops.cost; 1 when it names none, or no policy):
 * compare and fit plan their threads by it (study/pool.h). */
double gm_policy_spec_cost(const char *spec);
/* The costs of n * times simulations: entry k is specs[k % n]'s (compare
 * runs each policy once per allocator). One allocation (free() it); NULL
 * when out of memory, which gm_parallel_for_cost takes as equal costs. */
double *gm_policy_spec_costs(char *const *specs, size_t n, size_t times);
/* 1 when spec is the policy `pytorch` (with or without parameters): the
 * allocator's own behaviour, what a user can deploy today; the others need
 * a custom allocator (policies/README.md, "Deployable today"). */
int gm_policy_spec_deployable(const char *spec);

#endif
