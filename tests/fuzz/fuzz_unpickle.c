/*
 * fuzz_unpickle.c - libFuzzer harness for traces/unpickle.c (see README.md).
 *
 * Parses the input with a small memory limit, then reads the result the way
 * an importer would (every accessor, a bounded repr, dict look-ups), checking
 * the invariants unpickle.h promises: a root on success, a message on failure,
 * depth within the limit, dict keys unique and found by pkl_dict_get.
 */
#include "traces/unpickle.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_MAX_DEPTH 64u

static void check(int cond)
{
    if (!cond) abort();
}

/* Touch every node reachable within a bounded number of visits (shared nodes make the full
 * walk exponential). */
static void walk(const pkl_value *v, unsigned depth, size_t *budget)
{
    if (!*budget) return;
    --*budget;
    check(v != NULL && v->kind < PKL_KIND_COUNT);
    check(v->depth <= FUZZ_MAX_DEPTH && depth + v->depth <= FUZZ_MAX_DEPTH);
    int64_t i;
    uint64_t u;
    double d;
    bool b;
    size_t n;
    (void)pkl_as_int(v, &i);
    (void)pkl_as_u64(v, &u);
    (void)pkl_as_double(v, &d);
    (void)pkl_as_bool(v, &b);
    const char *s = pkl_as_str(v, &n);
    if (s) check(s[n] == 0);
    if (pkl_is_seq(v)) {
        for (size_t k = 0; k < pkl_len(v); k++) {
            const pkl_value *c = pkl_item(v, k);
            check(c && c->depth < v->depth);
            walk(c, depth + 1, budget);
        }
        check(pkl_item(v, pkl_len(v)) == NULL);
    } else if (pkl_is(v, PKL_DICT)) {
        for (size_t k = 0; k < pkl_len(v); k++) {
            const pkl_entry *e = pkl_dict_entry(v, k);
            check(e && e->key->kind <= PKL_BYTES && e->value->depth < v->depth);
            if (e->key->kind == PKL_STR && strlen(e->key->u.s.data) == e->key->u.s.len)
                check(pkl_dict_get(v, e->key->u.s.data) == e->value); /* keys are unique */
            walk(e->key, depth + 1, budget);
            walk(e->value, depth + 1, budget);
        }
        (void)pkl_dict_get(v, "segments");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pkl_opts opts = {.name = "fuzz.pickle", .max_depth = FUZZ_MAX_DEPTH, .max_bytes = 64u << 20};
    pkl_doc *doc = NULL;
    gm_err err = {0};
    int rc = pkl_parse(data, size, &opts, &doc, &err);
    if (rc != GM_OK) {
        check(doc == NULL && err.code == rc && err.msg[0] != 0);
        check(strncmp(err.msg, "fuzz.pickle: offset ", 20) == 0 || rc == GM_ENOMEM);
        return 0;
    }
    const pkl_value *root = pkl_root(doc);
    check(root != NULL);
    size_t budget = 100000;
    walk(root, 0, &budget);
    static char buf[1 << 16];
    (void)pkl_repr(root, buf, sizeof buf);
    check(strlen(buf) < sizeof buf);
    (void)pkl_repr(root, buf, 5);
    pkl_free(doc);
    return 0;
}
