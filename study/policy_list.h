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
/* 1 when spec names a policy with a timer (work on every tick: predictive,
 * oracle), the ones that take longest; else 0. */
int gm_policy_spec_timed(const char *spec);
/* 1 when spec is the policy `pytorch` (with or without parameters): the
 * allocator's own behaviour, what a user can deploy today; the others need
 * a custom allocator (policies/README.md, "Deployable today"). */
int gm_policy_spec_deployable(const char *spec);

#endif
