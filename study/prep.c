/* prep.c - see prep.h. */
#include "prep.h"

#include <pthread.h>
#include <stdlib.h>

#include "policies/registry.h"
#include "sim/policy.h"

enum { NOT_STARTED, MAKING, MADE };

struct gm_prep {
    gm_policy_prep h; /* first: the engine calls h.take */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int state;
    gm_sim_config cfg;
    size_t i;
    gm_policy *pol; /* made: the instance it was made on, or NULL */
};

int gm_prep_wanted(const gm_sim_config *cfg, size_t i, double *share)
{
    const gm_policy_ops *ops;
    const char *params;
    gm_err err = {0};
    if (gm_policy_lookup(cfg->policy ? cfg->policy : "pytorch", &ops, &params, &err) != GM_OK ||
        !gm_engine_prepares(cfg, ops, i))
        return 0;
    *share = ops->prepare_share;
    return 1;
}

/* 1: the caller makes it (it was not started); 0: it is made (waited for
 * while another thread made it). */
static int claim(gm_prep *p)
{
    pthread_mutex_lock(&p->mu);
    int mine = p->state == NOT_STARTED;
    if (mine) p->state = MAKING;
    while (!mine && p->state != MADE)
        pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
    return mine;
}

static void made(gm_prep *p)
{
    pthread_mutex_lock(&p->mu);
    p->state = MADE;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void gm_prep_make(gm_prep *p)
{
    if (!claim(p)) return;
    const gm_policy_ops *ops;
    const char *params;
    gm_err err = {0};
    /* an error makes nothing (p->pol stays NULL): the run makes its own and says it */
    if (gm_policy_lookup(p->cfg.policy ? p->cfg.policy : "pytorch", &ops, &params, &err) == GM_OK)
        gm_engine_prepare(&p->cfg, ops, params, p->i, &p->pol, &err);
    made(p);
}

/* The run's: what was made, or NULL (not started: the run makes its own,
 * and the job then makes nothing). */
static void *take(gm_policy_prep *h)
{
    gm_prep *p = (gm_prep *)h;
    if (claim(p)) {
        made(p);
        return NULL;
    }
    return p->pol ? p->pol->state : NULL;
}

gm_prep *gm_prep_new(const gm_sim_config *cfg, size_t i)
{
    gm_prep *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->h.take = take;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->state = NOT_STARTED;
    p->cfg = *cfg;
    p->cfg.policy_prep = NULL;
    p->i = i;
    return p;
}

gm_policy_prep *gm_prep_handle(gm_prep *p)
{
    return p ? &p->h : NULL;
}

void gm_prep_free(gm_prep *p)
{
    if (!p) return;
    gm_policy_destroy(p->pol);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
