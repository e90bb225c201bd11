/* alloc_list.c - see alloc_list.h. */
#include "alloc_list.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/alloc.h"

/* The model whose name starts piece (followed by ':' or the end), or NULL. */
static const gm_alloc_ops *model_at(const char *piece, size_t len)
{
    for (size_t i = 0; gm_alloc_at(i); i++) {
        const char *nm = gm_alloc_at(i)->name;
        size_t k = strlen(nm);
        if (len >= k && !strncmp(piece, nm, k) && (len == k || piece[k] == ':'))
            return gm_alloc_at(i);
    }
    return NULL;
}

int gm_alloc_list_split(const char *list, gm_alloc_choice **out, size_t *n, gm_err *err)
{
    *out = NULL;
    *n = 0;
    if (!list || !*list)
        return gm_errf(err, GM_EUSAGE,
                       "--allocators: empty list; give NAME[:SETTINGS],... from: %s",
                       gm_alloc_names());
    size_t cap = 1;
    for (const char *q = list; *q; q++)
        cap += *q == ',';
    gm_alloc_choice *v = calloc(cap, sizeof *v);
    if (!v) return gm_errf(err, GM_ENOMEM, "out of memory");
    size_t k = 0;
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        const gm_alloc_ops *m = model_at(p, len);
        if (m) {
            gm_alloc_choice *c = &v[k++];
            snprintf(c->name, sizeof c->name, "%s", m->name);
            size_t nl = strlen(m->name);
            if (len > nl) {
                c->conf_given = 1;
                snprintf(c->conf, sizeof c->conf, "%.*s", (int)(len - nl - 1), p + nl + 1);
            }
        } else if (k > 0 && v[k - 1].conf_given) { /* more settings of the previous entry */
            size_t cl = strlen(v[k - 1].conf);
            snprintf(v[k - 1].conf + cl, sizeof v[k - 1].conf - cl, ",%.*s", (int)len, p);
        } else {
            gm_errf(err, GM_EUSAGE,
                    "--allocators: '%.*s' is not an allocator; give NAME[:SETTINGS],... with NAME "
                    "one of: %s",
                    (int)len, p, gm_alloc_names());
            free(v);
            return GM_EUSAGE;
        }
        p += len;
        if (*p == ',') p++;
    }
    for (size_t i = 0; i < k; i++)
        for (size_t j = 0; j < i; j++)
            if (!strcmp(v[i].name, v[j].name) && v[i].conf_given == v[j].conf_given &&
                !strcmp(v[i].conf, v[j].conf)) {
                char lab[600];
                gm_alloc_choice_label(&v[i], lab, sizeof lab);
                gm_errf(err, GM_EUSAGE, "--allocators: '%s' is listed twice", lab);
                free(v);
                return GM_EUSAGE;
            }
    *out = v;
    *n = k;
    return GM_OK;
}

void gm_alloc_choice_label(const gm_alloc_choice *c, char *buf, size_t len)
{
    if (c->conf_given)
        snprintf(buf, len, "%s:%s", c->name, c->conf);
    else
        snprintf(buf, len, "%s", c->name);
}
