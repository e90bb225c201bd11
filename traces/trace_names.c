/*
 * trace_names.c - names of the trace enums (trace.h) for printing and
 * parsing. The strings are the ones FORMAT.md documents and that PyTorch's
 * memory profiler uses for categories, so a name means the same everywhere.
 */
#include "trace.h"

#include <string.h>

static const char *const op_names[GM_OP_COUNT] = {
    [GM_OP_ALLOC] = "alloc",
    [GM_OP_FREE] = "free",
    [GM_OP_SEGMENT_ALLOC] = "segment_alloc",
    [GM_OP_SEGMENT_FREE] = "segment_free",
    [GM_OP_SEGMENT_MAP] = "segment_map",
    [GM_OP_SEGMENT_UNMAP] = "segment_unmap",
    [GM_OP_EMPTY_CACHE] = "empty_cache",
    [GM_OP_OOM] = "oom",
    [GM_OP_FREE_REQUESTED] = "free_requested",
};

static const char *const category_names[GM_CAT_COUNT] = {
    [GM_CAT_UNKNOWN] = "unknown",
    [GM_CAT_PARAMETER] = "parameter",
    [GM_CAT_OPTIMIZER_STATE] = "optimizer_state",
    [GM_CAT_INPUT] = "input",
    [GM_CAT_TEMPORARY] = "temporary",
    [GM_CAT_ACTIVATION] = "activation",
    [GM_CAT_GRADIENT] = "gradient",
    [GM_CAT_AUTOGRAD_DETAIL] = "autograd_detail",
};

static const char *const phase_names[GM_PHASE_COUNT] = {
    [GM_PHASE_UNKNOWN] = "unknown",
    [GM_PHASE_FORWARD] = "forward",
    [GM_PHASE_BACKWARD] = "backward",
    [GM_PHASE_OPTIMIZER] = "optimizer",
};

/* Out-of-range values print as "?" so a caller can always print the result. */
const char *gm_op_name(int op)
{
    return op >= 0 && op < GM_OP_COUNT ? op_names[op] : "?";
}

const char *gm_category_name(int cat)
{
    return cat >= 0 && cat < GM_CAT_COUNT ? category_names[cat] : "?";
}

const char *gm_phase_name(int phase)
{
    return phase >= 0 && phase < GM_PHASE_COUNT ? phase_names[phase] : "?";
}

int gm_category_parse(const char *s)
{
    if (!s) return -1;
    for (int i = 0; i < GM_CAT_COUNT; i++)
        if (strcmp(s, category_names[i]) == 0) return i;
    return -1;
}
