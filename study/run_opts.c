/* run_opts.c - see run_opts.h. */
#include "run_opts.h"

#include "policies/registry.h"
#include "sim/device_profile.h"
#include "traces/alloc_conf.h"
#include "traces/gpus.h"

#include <stdlib.h>
#include <string.h>

enum {
    O_POLICY = 2000,
    O_ALLOCATOR,
    O_ALLOC_CONF,
    O_CAPACITY,
    O_OVERHEAD,
    O_FRACTION,
    O_ON_OOM,
    O_LENIENT,
    O_PHASE_EC,
    O_OFFSET,
    O_REPEAT,
    O_QUOTA,
    O_DEVICE_PROFILE,
    O_SCOPE,
    O_GPU,
    O_INITIAL,
    O_TORCH,
    O_CLASS,
    O_REQUEST,
    O_LIMIT,
    O_SHARE,
    O_MPS,
    O_HOST_TIER,
    O_NO_FF,
    O_LAST = O_NO_FF, /* gm_run_opts_owns: every value from O_POLICY up to here */
};

static const struct option shared[] = {
    {"policy", required_argument, NULL, O_POLICY},
    {"allocator", required_argument, NULL, O_ALLOCATOR},
    {"alloc-conf", required_argument, NULL, O_ALLOC_CONF},
    {"capacity", required_argument, NULL, O_CAPACITY},
    {"overhead", required_argument, NULL, O_OVERHEAD},
    {"memory-fraction", required_argument, NULL, O_FRACTION},
    {"on-oom", required_argument, NULL, O_ON_OOM},
    {"lenient", no_argument, NULL, O_LENIENT},
    {"no-fast-forward", no_argument, NULL, O_NO_FF},
    {"empty-cache-at-phase", no_argument, NULL, O_PHASE_EC},
    {"offset", required_argument, NULL, O_OFFSET},
    {"repeat", required_argument, NULL, O_REPEAT},
    {"quota", required_argument, NULL, O_QUOTA},
    {"device-profile", required_argument, NULL, O_DEVICE_PROFILE},
    {"scope", required_argument, NULL, O_SCOPE},
    {"gpu", required_argument, NULL, O_GPU},
    {"initial-state", required_argument, NULL, O_INITIAL},
    {"torch-version", required_argument, NULL, O_TORCH},
    {"class", required_argument, NULL, O_CLASS},
    {"request", required_argument, NULL, O_REQUEST},
    {"limit", required_argument, NULL, O_LIMIT},
    {"share", required_argument, NULL, O_SHARE},
    {"mps", no_argument, NULL, O_MPS},
    {"host-tier", required_argument, NULL, O_HOST_TIER},
};
#define NSHARED (sizeof shared / sizeof shared[0])

void gm_run_opts_init(gm_run_opts *o)
{
    static const gm_latency lat = GM_LATENCY_DEFAULT;
    memset(o, 0, sizeof *o);
    o->next.repeat = 1;
    o->overhead = GM_DEFAULT_OVERHEAD;
    o->latency = lat;
}

void gm_run_opts_free(gm_run_opts *o)
{
    free(o->tenants);
    o->tenants = NULL;
    o->n_tenants = o->cap_tenants = 0;
}

int gm_run_opts_longopts(struct option *out, size_t cap, const struct option *extra)
{
    size_t n = 0, want = NSHARED;
    for (size_t i = 0; extra && extra[i].name; i++)
        want++;
    for (size_t i = 0; i < NSHARED && n + 1 < cap; i++)
        out[n++] = shared[i];
    for (size_t i = 0; extra && extra[i].name && n + 1 < cap; i++)
        out[n++] = extra[i];
    memset(&out[n], 0, sizeof out[n]);
    return n == want;
}

static int add_trace(gm_run_opts *o, const char *path, gm_err *err)
{
    if (o->n_tenants == o->cap_tenants) {
        size_t cap = o->cap_tenants ? o->cap_tenants * 2 : 4;
        gm_tenant_spec *t = realloc(o->tenants, cap * sizeof *t);
        if (!t) return gm_errf(err, GM_ENOMEM, "out of memory");
        o->tenants = t;
        o->cap_tenants = cap;
    }
    o->tenants[o->n_tenants] = o->next;
    o->tenants[o->n_tenants].path = path;
    o->n_tenants++;
    return GM_OK;
}

/* A profile from `gmreplay --calibrate`: its latency model always; its
 * context overhead and capacity unless --overhead / --capacity say otherwise
 * (before or after it on the command line). */
static int apply_profile(gm_run_opts *o, const char *path, gm_err *err)
{
    gm_device_profile p;
    int rc = gm_device_profile_load(path, &p, err);
    if (rc) return rc;
    o->device_profile = path;
    o->latency = p.latency;
    if (!o->overhead_given) o->overhead = p.context_overhead_bytes;
    o->profile_capacity = p.total_bytes; /* --capacity and --gpu come first */
    snprintf(o->profile_why, sizeof o->profile_why, "--device-profile %s", path);
    return GM_OK;
}

int gm_run_opts_gpu(const char *arg, const char **name, uint64_t *bytes, gm_err *err)
{
    const gm_gpu *g = gm_gpu_find(arg);
    if (!g) {
        char keys[512];
        gm_gpu_keys(keys, sizeof keys);
        return gm_errf(err, GM_EUSAGE,
                       "--gpu '%s': not a GPU gmsim knows; choose one of: %s (or "
                       "give --capacity SIZE)",
                       arg, keys);
    }
    *name = g->key;
    *bytes = g->cuda_bytes;
    return GM_OK;
}

int gm_initial_state_parse(const char *arg, int *mode, gm_err *err)
{
    static const char *const names[] = {"live", "recorded", "none"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(arg, names[i])) {
            *mode = i == 0 ? GM_INITIAL_LIVE : i == 1 ? GM_INITIAL_RECORDED : GM_INITIAL_NONE;
            return GM_OK;
        }
    return gm_errf(err, GM_EUSAGE, "--initial-state takes live, recorded or none, not '%s'", arg);
}

const char *gm_initial_state_name(int mode)
{
    return mode == GM_INITIAL_RECORDED ? "recorded" : mode == GM_INITIAL_NONE ? "none" : "live";
}

int gm_run_opts_parse(gm_run_opts *o, int c, const char *arg, gm_err *err)
{
    switch (c) {
    case 1:
        return add_trace(o, arg, err);
    case O_POLICY:
        o->policy = arg;
        return GM_OK;
    case O_ALLOCATOR:
        o->allocator = arg;
        return GM_OK;
    case O_ALLOC_CONF:
        o->alloc_conf = arg;
        return GM_OK;
    case O_CAPACITY:
        if (gm_parse_size(arg, "--capacity", &o->capacity, err)) return err->code;
        if (o->capacity == 0)
            return gm_errf(err, GM_EINVAL, "--capacity must be more than 0 bytes");
        if (!o->size_note[0])
            gm_size_decimal_note(arg, o->capacity, o->size_note, sizeof o->size_note);
        return GM_OK;
    case O_OVERHEAD:
        o->overhead_given = 1;
        return gm_parse_size(arg, "--overhead", &o->overhead, err);
    case O_DEVICE_PROFILE:
        return apply_profile(o, arg, err);
    case O_FRACTION:
        return gm_parse_double(arg, "--memory-fraction", 0.0, 1.0, &o->memory_fraction, err);
    case O_ON_OOM:
        o->on_oom_skip = o->on_oom_chain = 0;
        if (!strcmp(arg, "skip"))
            o->on_oom_skip = 1;
        else if (!strcmp(arg, "chain"))
            o->on_oom_chain = 1;
        else if (strcmp(arg, "abort"))
            return gm_errf(err, GM_EUSAGE, "--on-oom takes 'abort', 'skip' or 'chain', not '%s'",
                           arg);
        return GM_OK;
    case O_HOST_TIER:
        if (gm_host_tier_parse(arg, &o->host_tier, err)) return err->code;
        o->has_host_tier = 1;
        return GM_OK;
    case O_PHASE_EC:
        o->empty_cache_at_phase = 1;
        return GM_OK;
    case O_LENIENT:
        o->lenient = 1;
        return GM_OK;
    case O_NO_FF:
        o->no_fast_forward = 1;
        return GM_OK;
    case O_OFFSET:
        return gm_parse_time(arg, "--offset", &o->next.offset_ns, err);
    case O_REPEAT: {
        double v;
        if (gm_parse_double(arg, "--repeat", 1, 1e6, &v, err)) return err->code;
        if (v != (double)(uint32_t)v)
            return gm_errf(err, GM_EINVAL, "--repeat takes a whole number, not '%s'", arg);
        o->next.repeat = (uint32_t)v;
        return GM_OK;
    }
    case O_QUOTA:
        return gm_parse_size(arg, "--quota", &o->next.quota_bytes, err);
    case O_SCOPE:
        if (!strcmp(arg, "self") || !strcmp(arg, "device")) {
            o->scope_device = arg[0] == 'd';
            return GM_OK;
        }
        return gm_errf(err, GM_EUSAGE, "--scope takes 'self' or 'device', not '%s'", arg);
    case O_GPU:
        if (gm_run_opts_gpu(arg, &o->gpu, &o->gpu_bytes, err)) return err->code;
        snprintf(o->gpu_why, sizeof o->gpu_why, "--gpu %s", o->gpu);
        return GM_OK;
    case O_INITIAL:
        return gm_initial_state_parse(arg, &o->initial_state, err);
    case O_CLASS:
        return gm_tenant_class_parse(arg, &o->next.cls, err);
    case O_REQUEST:
        return gm_parse_size(arg, "--request", &o->next.request_bytes, err);
    case O_LIMIT:
        return gm_parse_size(arg, "--limit", &o->next.limit_bytes, err);
    case O_SHARE:
        return gm_share_mode_parse(arg, &o->share, err);
    case O_MPS:
        o->mps = 1;
        return GM_OK;
    case O_TORCH:
        if (!(o->torch_version = gm_torch_version_parse(arg)))
            return gm_errf(err, GM_EUSAGE,
                           "--torch-version takes a PyTorch version such as 2.5 or 2.10, not '%s'",
                           arg);
        return GM_OK;
    default:
        return gm_errf(err, GM_EUSAGE, "unexpected option");
    }
}

void gm_run_opts_help(FILE *f, int one_policy)
{
    fprintf(f, "simulation:\n");
    if (one_policy)
        fprintf(f,
                "  --policy NAME[:k=v,..] release policy (default pytorch); policies:\n"
                "                         %s (policies/README.md)\n",
                gm_policy_names());
    fprintf(f, "  --allocator NAME       allocator model (default pytorch; cuda-async when the\n"
               "                         settings say backend:cudaMallocAsync):\n"
               "                        ");
    for (size_t i = 0; gm_alloc_at(i); i++)
        fprintf(f, "%s %s", i ? "," : "", gm_alloc_at(i)->name);
    fprintf(f, "\n"
               "                         (README.md, \"Allocator models\")\n"
               "  --alloc-conf STRING    the allocator's settings: PYTORCH_CUDA_ALLOC_CONF,\n"
               "                         verbatim, e.g. 'max_split_size_mb:128,expandable_\n"
               "                         segments:True'; the other models' own keys, e.g.\n"
               "                         'initial_pool_size:8GiB' (rmm-pool)\n"
               "                         (default: the settings recorded in the trace, if any)\n"
               "  --torch-version X.Y    parse it as that PyTorch does (default: the version the\n"
               "                         trace records, else the newest; traces/ALLOC_CONF.md)\n"
               "  --capacity SIZE        device memory, e.g. 24GiB, 40GB (default: the trace's)\n"
               "  --gpu NAME             a known GPU's memory instead (traces/GPUS.md), e.g.\n"
               "                         h100-80gb, a100-40gb, l4, rtx4090\n"
               "  --initial-state MODE   what existed before the trace's first event: live (the\n"
               "                         live tensors, allocated through the model under test,\n"
               "                         which builds its own cache; default), recorded (also\n"
               "                         the recorded allocator's cache, as gmsim fidelity\n"
               "                         does) or none\n"
               "  --overhead SIZE        CUDA context memory per tenant (default 512MiB)\n"
               "  --device-profile FILE  a GPU measured by 'gmreplay --calibrate': its driver\n"
               "                         latency, context overhead and (unless --capacity/\n"
               "                         --overhead are given) capacity\n"
               "  --memory-fraction F    torch.cuda.set_per_process_memory_fraction(F)\n"
               "  --on-oom abort|skip|chain  abort the tenant like a real job (default), skip\n"
               "                         the failing allocation and go on counting OOMs, or\n"
               "                         chain: release every cache and retry, then halve\n"
               "                         activations for the rest of the iteration (precision\n"
               "                         degraded), then spill to the host tier (pcie4 unless\n"
               "                         --host-tier); OOM only if all three fail\n"
               "  --host-tier LINK[,size=SIZE][,touch=free|none]\n"
               "                         spill live blocks (oldest allocated first) to host\n"
               "                         memory when an allocation would fail, over pcie4 (25\n"
               "                         GB/s), pcie5 (50), c2c (NVLink-C2C, 450) or N GB/s;\n"
               "                         touch=free (default) fetches a block back before its\n"
               "                         free, none drops it; size caps the host (default none)\n"
               "  --empty-cache-at-phase call torch.cuda.empty_cache() where the program\n"
               "                         enters a new phase (forward, backward, optimizer)\n"
               "  --lenient              skip and count frees of unknown addresses instead of\n"
               "                         stopping with an error\n"
               "  --no-fast-forward      simulate every event, also the iterations that repeat\n"
               "                         one already simulated from the same allocator state\n"
               "                         (by default applied from its record: the same results)\n"
               "  --scope self|device    may a tenant whose allocation fails make the other\n"
               "                         tenants release cached memory? (default self)\n"
               "  --share MODE           how tenants share the device: requests (each request\n"
               "                         held for its tenant, limits capped, others' cache\n"
               "                         released: opportunistic first, guaranteed never;\n"
               "                         the default when a trace has --class/--request/\n"
               "                         --limit), hard-cap (each limit a hard cap, as HAMi\n"
               "                         or MPS) or none (README, \"Sharing a GPU\")\n"
               "  --mps                  CUDA MPS: one context (--overhead) for all tenants,\n"
               "                         each --limit a hard cap (CUDA_MPS_PINNED_DEVICE_MEM_\n"
               "                         LIMIT)\n"
               "per trace (applies to the traces after it):\n"
               "  --offset TIME          start time on the device, e.g. 2s, 150ms\n"
               "  --repeat N             replay the trace N times back to back (steady state)\n"
               "  --quota SIZE           cap on the tenant's reserved memory\n"
               "  --class CLASS          guaranteed, burstable or opportunistic (default: as\n"
               "                         Kubernetes derives it from --request and --limit)\n"
               "  --request SIZE         memory held for the tenant, e.g. 8Gi\n"
               "  --limit SIZE           the most it may hold, e.g. 12Gi (a limit alone makes\n"
               "                         the request equal to it, as in Kubernetes)\n");
}

int gm_run_opts_owns(int c)
{
    return c == 1 || (c >= O_POLICY && c <= O_LAST);
}

void gm_run_opts_config(const gm_run_opts *o, gm_sim_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->tenants = o->tenants;
    cfg->n_tenants = o->n_tenants;
    cfg->allocator = o->allocator;
    cfg->alloc_conf = o->alloc_conf;
    cfg->policy = o->policy;
    cfg->memory_fraction = o->memory_fraction;
    cfg->capacity_bytes = o->capacity    ? o->capacity
                          : o->gpu_bytes ? o->gpu_bytes
                                         : o->profile_capacity;
    if (!o->capacity && o->gpu_bytes)
        cfg->capacity_source = o->gpu_why;
    else if (!o->capacity && o->profile_capacity)
        cfg->capacity_source = o->profile_why;
    cfg->overhead_bytes = o->overhead;
    cfg->overhead_given = o->overhead_given;
    cfg->initial_state = o->initial_state;
    cfg->torch_version = o->torch_version;
    cfg->latency = o->latency;
    cfg->on_oom_skip = o->on_oom_skip;
    cfg->lenient = o->lenient;
    cfg->no_fast_forward = o->no_fast_forward;
    cfg->empty_cache_at_phase = o->empty_cache_at_phase;
    cfg->scope_device = o->scope_device;
    cfg->share = o->share;
    cfg->mps = o->mps;
    cfg->on_oom_chain = o->on_oom_chain;
    cfg->host_tier = o->has_host_tier ? &o->host_tier : NULL;
}
