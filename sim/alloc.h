/*
 * alloc.h - the allocator model interface.
 *
 * An allocator model (pytorch, direct, ...) is a const gm_alloc_ops found by
 * name; an instance is a gm_alloc that belongs to one tenant. It gets driver
 * memory only through the gm_device backend, and asks its release policy
 * (policy.h) what cached memory to give back and when.
 *
 * Counters (Q, A, R, driver calls) are kept up to date by the model on every
 * call, so metrics.c can read them after each event without asking.
 */
#ifndef GM_ALLOC_H
#define GM_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "device.h"
#include "base/err.h"
#include "traces/trace.h"

struct gm_policy;

/* What an allocator instance has done so far; read by metrics.c. */
typedef struct gm_alloc_counters {
    uint64_t requested_bytes; /* Q: sum of live requested sizes          */
    uint64_t allocated_bytes; /* A: sum of live block sizes (rounded)      */
    uint64_t reserved_bytes;  /* R: memory held from the driver           */
    uint64_t n_driver_alloc;  /* cudaMalloc / cuMemMap calls              */
    uint64_t n_driver_free;   /* cudaFree / cuMemUnmap calls              */
    uint64_t driver_alloc_ns; /* their modelled (or measured) time        */
    uint64_t driver_free_ns;
    /* PyTorch's num_alloc_retries (DeviceStats): driver retries made after
     * the whole cache was flushed (release_cached_blocks), counted whether or
     * not the retry then succeeds. */
    uint64_t num_alloc_retries;
    uint64_t grow_retries;    /* every driver retry, whatever was released before it */
    uint64_t n_cache_flushes; /* "release all cached" steps (PyTorch's release_cached_blocks) */
    uint64_t released_bytes;  /* bytes given back by policy decisions     */
    /* the largest classic segment the model made (pytorch: 0 for the others
     * and for expandable segments): no block or request it served was
     * larger (study/tune.c shares runs across max_split_size_mb by it) */
    uint64_t largest_segment;
} gm_alloc_counters;

/*
 * PyTorch's own allocator statistics (c10/cuda/CUDACachingAllocator.h
 * DeviceStats, what torch.cuda.memory_stats() and memory_summary() print),
 * for a model that keeps them (gm_alloc_ops.stats). Every Stat has
 * PyTorch's four figures: current; peak (the largest current, raised only
 * when it grows: increase_stat); allocated (the sum of every increase) and
 * freed (the sum of every decrease). Array stats are kept per StatType:
 * all (AGGREGATE), small_pool, large_pool (a block's pool decides).
 */
typedef struct gm_stat {
    uint64_t current, peak, allocated, freed;
} gm_stat;

enum gm_stat_type { GM_STAT_ALL = 0, GM_STAT_SMALL = 1, GM_STAT_LARGE = 2, GM_STAT_TYPES = 3 };

typedef struct gm_alloc_stats {
    gm_stat allocation[GM_STAT_TYPES];      /* allocations the program holds (count)      */
    gm_stat segment[GM_STAT_TYPES];         /* cudaMalloc'd segments (expandable: none)   */
    gm_stat active[GM_STAT_TYPES];          /* blocks allocated or awaiting their free    */
    gm_stat inactive_split[GM_STAT_TYPES];  /* free blocks of split classic segments      */
    gm_stat allocated_bytes[GM_STAT_TYPES]; /* bytes of `allocation` (rounded blocks)     */
    gm_stat reserved_bytes[GM_STAT_TYPES];  /* bytes held from the driver (mapped pages)  */
    gm_stat active_bytes[GM_STAT_TYPES];
    gm_stat inactive_split_bytes[GM_STAT_TYPES];
    gm_stat requested_bytes[GM_STAT_TYPES]; /* the program's sizes of active blocks       */
    gm_stat oversize_allocations;           /* allocations of blocks >= max_split_size    */
    gm_stat oversize_segments;              /* segments >= max_split_size                 */
    uint64_t num_alloc_retries;             /* gm_alloc_counters.num_alloc_retries        */
    uint64_t num_ooms;                      /* allocations that failed for good           */
    uint64_t num_device_alloc;              /* cudaMalloc + cuMemMap calls                */
    uint64_t num_device_free;               /* cudaFree + cuMemUnmap calls                */
    int64_t max_split_size;                 /* bytes; -1 when unset, as PyTorch prints it */
} gm_alloc_stats;

/* Time spent in driver calls, allocations and frees. */
static inline uint64_t gm_counters_driver_ns(const gm_alloc_counters *c)
{
    return c->driver_alloc_ns + c->driver_free_ns;
}

/* A driver-level event, reported to an optional hook (fidelity checks,
 * gmreplay's logs). op is GM_OP_SEGMENT_ALLOC or GM_OP_SEGMENT_FREE. */
typedef struct gm_seg_event {
    int op;
    uint64_t addr, size, stream;
    uint64_t t_ns;
} gm_seg_event;

/* How a policy sees one segment. Never allocator internals beyond this. */
typedef struct gm_seg_info {
    uint64_t id;         /* opaque handle, valid until the next malloc or free; a release
                            invalidates only the id it released (see release) */
    uint64_t addr, size; /* driver range (expandable: mapped bytes)   */
    uint64_t stream;
    uint8_t small_pool;       /* 1: small-block pool (<= 1 MiB requests)   */
    uint8_t expandable;       /* 1: an expandable segment (VMM pages)      */
    uint32_t n_blocks;        /* blocks in the segment                     */
    uint32_t n_allocated;     /* of which allocated                        */
    uint64_t allocated_bytes; /* bytes in allocated blocks                 */
    uint64_t largest_free;    /* largest free block                        */
    uint64_t releasable;  /* bytes a release would return now (whole free segment, or free pages) */
    uint64_t last_use_ns; /* last malloc/free of a block in it         */
    uint64_t
        gc_age; /* PyTorch's GC age of the whole-free block (pool lookups since it was freed) */
    uint32_t category_mask; /* 1<<gm_category of tensors that used it    */
} gm_seg_info;

/* A segment in short (briefs, segment_at): the fields of its gm_seg_info
 * that a policy reading the segments on every timer tick needs, 48 bytes
 * instead of 96 (and no view for the model to build). */
typedef struct gm_seg_brief {
    uint64_t id; /* as in gm_seg_info: release() takes it */
    uint64_t addr, size, last_use_ns, releasable;
    uint32_t n_allocated;
    uint8_t small_pool, expandable;
} gm_seg_brief;

/* How many classic segments of segments() there are of one pool and size
 * (gm_alloc_ops.class_counts). */
typedef struct gm_seg_class {
    uint64_t size;
    uint32_t count;
    uint8_t small_pool;
} gm_seg_class;

/* Allocator settings a policy may read. */
typedef struct gm_alloc_limits {
    uint64_t max_split_size; /* UINT64_MAX when unset                */
    double gc_threshold;     /* 0 when unset                         */
    uint64_t memory_limit;   /* per-process fraction * capacity, 0 = unset */
    uint64_t device_capacity;
    /* 1: the library this model stands for handles an OOM itself, and the
     * model does what it does (PyTorch's cudaMallocAsync backend raises at
     * once; RMM's resources throw; TensorFlow's BFC frees whole free regions
     * and retries); the `pytorch` policy, which stands for the library's own
     * behaviour, then adds nothing. 0: PyTorch's native allocator. */
    int library_handles_oom;
} gm_alloc_limits;

typedef struct gm_alloc gm_alloc;

/*
 * An allocator model: a const gm_alloc_ops in its own file sim/alloc_<name>.c,
 * listed by one line in sim/alloc_registry.c and found by name (--allocator).
 * The model keeps its state in a->impl and gets driver memory only through
 * gm_alloc_driver_*() below, which keep a->c up to date; every member is
 * required unless its comment says otherwise. The version field comes first, so that a model built
 * against another layout of this struct is refused (gm_alloc_create) instead of being called
 * through the wrong pointers.
 */
#define GM_ALLOC_VERSION 13

typedef struct gm_alloc_ops {
    /* GM_ALLOC_VERSION: the interface this model implements. */
    int version;
    /* Its --allocator name, and one line for --help and reports. */
    const char *name;
    const char *summary;
    /* Optional: what a simulation with this model takes, relative to one
     * with `pytorch` (0 = the same), as `gmsim run -q --allocator NAME`
     * measured it (bench/README.md, "Seventh round"). compare --allocators
     * splits its runs between threads by it (study/pool.h); nothing else
     * reads it, and no result depends on it. */
    double cost;
    /* Set up a->impl for the settings conf (PYTORCH_CUDA_ALLOC_CONF syntax,
     * "" = defaults). GM_EINVAL naming the setting it cannot model. */
    int (*create)(gm_alloc *a, const char *conf, gm_err *err);
    /* Give every segment back to the device and free a->impl. */
    void (*destroy)(gm_alloc *a);
    /* Allocate `size` requested bytes on `stream` for a tensor of `category`
     * (traces/trace.h). GM_OK with *handle set, or GM_EOOM once the release
     * policy (a->policy) has done all it can. */
    int (*malloc)(gm_alloc *a, uint64_t size, uint64_t stream, uint8_t category, uint64_t now_ns,
                  uint64_t *handle);
    /* Free the block of a handle from malloc or restore. */
    void (*free)(gm_alloc *a, uint64_t handle, uint64_t now_ns);
    /* The largest free cached block, in bytes (external fragmentation). */
    uint64_t (*largest_free)(gm_alloc *a);
    /* Rebuild memory alive before the first event: segments, then live blocks.
     * For each live block, *handles[i] receives its handle (0 if rows[i] is a segment). */
    int (*restore)(gm_alloc *a, const gm_init_row *rows, size_t n, uint64_t *handles, gm_err *err);
    /* Policy view: fill up to cap infos, return the number of segments. */
    size_t (*segments)(gm_alloc *a, gm_seg_info *buf, size_t cap);
    /* Give back what segment `id` can release now; returns bytes released.
     * It changes segment `id` only: every other segment keeps its id and
     * its view (segments()) until the next malloc or free, so a policy may
     * release several segments from one view. */
    uint64_t (*release)(gm_alloc *a, uint64_t id, uint64_t now_ns);
    /* torch.cuda.empty_cache(): release every releasable segment. */
    uint64_t (*empty_cache)(gm_alloc *a, uint64_t now_ns);
    /* Rounded block size the model would use for a request (for reports/tests). */
    uint64_t (*block_size)(gm_alloc *a, uint64_t size);
    /* Driver allocation a request would need if nothing cached fits, and
     * whether it is served from the small pool (policies that plan ahead). */
    uint64_t (*segment_size)(gm_alloc *a, uint64_t size, int *small_pool);
    /* Device address of a live allocation's block (handle from malloc/restore). */
    uint64_t (*block_addr)(gm_alloc *a, uint64_t handle);
    /* Bytes of a live allocation's block, as counted in allocated_bytes.
     * Optional: NULL means block_size() of the requested size. */
    uint64_t (*block_bytes)(gm_alloc *a, uint64_t handle);
    /* The segments of segments() whose releasable is not 0, as segments()
     * shows them but in any order (policies sort them), filling up to cap
     * and returning how many there are. Optional: NULL means segments()
     * filtered; a model that keeps them at hand answers without a walk of
     * every segment (policies ask on every timer tick and grow). */
    size_t (*releasable)(gm_alloc *a, gm_seg_info *buf, size_t cap);
    /* PyTorch's statistics for this instance so far (gm_alloc_stats), into
     * *out. Optional: NULL means the model keeps none ("not available";
     * only `pytorch` does, as PyTorch's native allocator counts them). */
    void (*stats)(gm_alloc *a, gm_alloc_stats *out);
    /* The program let go of a live block whose free comes later (a
     * free_requested event: record_stream). Optional, and it decides
     * nothing: a model that keeps stats counts the allocation as freed
     * here, as PyTorch's free() does before free_block. */
    void (*free_requested)(gm_alloc *a, uint64_t handle);
    /* The brief of the segment of segments() that starts at addr, as
     * briefs() shows it, into *out: 1, or 0 when there is none. Optional.
     * A model that has it has briefs too.
     * A model that has it also promises two things, which let a policy
     * count busy segments from releasable() alone between driver calls
     * (predictive): classic (not expandable) segments of segments() come
     * and go only with a driver call (a->c.n_driver_alloc or n_driver_free
     * moves), and a classic segment's releasable is not 0 exactly when it
     * holds no allocated block (n_allocated == 0). */
    int (*segment_at)(gm_alloc *a, uint64_t addr, gm_seg_brief *out);
    /* segments() in short, or with releasable_only releasable(): the same
     * segments (segments()' in the same order; releasable()'s in any, as
     * releasable() itself), each as the gm_seg_brief of its view,
     * filling up to cap and returning how many there are. Optional: NULL
     * means the views cut short (policies/seglist.h, gm_brieflist_fetch). */
    size_t (*briefs)(gm_alloc *a, int releasable_only, gm_seg_brief *buf, size_t cap);
    /*
     * Fast-forward (sim/ffwd.h): a training loop repeats its iterations, and
     * an iteration that starts from the state the one before it started
     * from, with the same events, makes the same decisions; the engine then
     * applies its recorded effect instead of calling malloc and free. The
     * members below are optional (ff_state, ff_segment and ff_touch all or
     * none; the others as their comments say); a model without them is
     * always simulated event by event.
     *
     * ff_state: everything the model's later decisions depend on, as words
     * into buf (up to cap), returning how many it needs: its segments in a
     * fixed order, their blocks with address, size, state, request and
     * category, and the order of any list a decision walks. Not what only
     * a policy reads and ff_touch restores (the last use), nor what decides
     * nothing. The promise: two equal states, with the same counters
     * (a->c) and the same calls from here on, make the same calls to the
     * device and the policy and give blocks at the same addresses and of
     * the same sizes. SIZE_MAX: no such promise in this configuration (a
     * setting whose state it does not write out). Once it knows the state
     * needs more than cap words it may stop and return any count above cap
     * (a caller that wants it whole asks again with more room; one that
     * only compares it with a state of cap words, or refuses a state that
     * large, need not pay for the rest: a million cached blocks). Called
     * rarely: at the start and end of a recorded iteration.
     */
    size_t (*ff_state)(gm_alloc *a, uint64_t *buf, size_t cap);
    /* The segment of a live block (opaque, not 0; stable until a driver
     * call), for ff_touch. */
    uint64_t (*ff_segment)(gm_alloc *a, uint64_t handle);
    /* Segment `seg` was last used at now_ns: what a malloc or free of one
     * of its blocks at now_ns leaves (its last_use_ns, as policies see it);
     * and its age, `age` from ff_seg_age, again (0: none to set). */
    void (*ff_touch)(gm_alloc *a, uint64_t seg, uint64_t now_ns, uint64_t age);
    /* Optional with ff_state, for a model whose segments age by a clock of
     * its own that the calls move (PyTorch's garbage collection: the pools'
     * lookups, GM_FF_CLOCKS of them), all three or none. ff_clock reads the
     * clocks; ff_advance moves them on by d (what a cycle moved them);
     * ff_seg_age is what the cycle left in segment `seg`'s age, relative
     * to the clocks `since` at its start (0: nothing that decides), for
     * ff_touch to set relative to the clocks before they move on. */
    void (*ff_clock)(gm_alloc *a, uint64_t clock[]);
    void (*ff_advance)(gm_alloc *a, const uint64_t d[]);
    uint64_t (*ff_seg_age)(gm_alloc *a, uint64_t seg, const uint64_t since[]);
    /* Optional with ff_state, for a model with stats: add d's `allocated`
     * and `freed` to those of every gm_stat of its statistics, which is
     * what a cycle leaves in them (its current values and peaks do not
     * move: the cycle ran from the same state before). */
    void (*ff_stats)(gm_alloc *a, const gm_alloc_stats *d);
    /*
     * Optional, all five or none, with the members above: the state in
     * GM_FF_PARTS independent parts (PyTorch's pools: part 0 the small
     * pool, part 1 the large one; part k's clock is ff_clock's clock k),
     * for a fast-forward of one part while the other is simulated
     * (sim/ffwd.h, "One part"). Independent: a malloc served without a
     * driver call, a policy call or garbage collection, and any free,
     * read and change the state of their block's part only, and leave
     * the other's as it was. ff_part_state is ff_state for part `part`
     * (its segments and their blocks; no list order, which only a
     * policy's view shows, and every policy sorts its views by an order
     * of its own that the address ends: policies/pressure.h); SIZE_MAX
     * when it makes no such promise (a configuration whose parts share
     * something, e.g. expandable segments). ff_part_of: the part an
     * allocation of `req` bytes goes to; ff_part_block: the part of live
     * block `handle`; ff_part_malloc: malloc when the request is served
     * without a driver call, policy call or garbage collection (from a
     * cached block), else 1 and nothing changed (a malloc would grow);
     * ff_part_largest_free: part `part`'s largest free block. While ff_on
     * the model keeps gm_alloc.ff_part per part.
     */
    size_t (*ff_part_state)(gm_alloc *a, int part, uint64_t *buf, size_t cap);
    int (*ff_part_of)(gm_alloc *a, uint64_t req);
    int (*ff_part_block)(gm_alloc *a, uint64_t handle);
    int (*ff_part_malloc)(gm_alloc *a, uint64_t req, uint64_t stream, uint8_t cat, uint64_t now,
                          uint64_t *handle);
    uint64_t (*ff_part_largest_free)(gm_alloc *a, int part);
    /* Optional with ff_part_state, for a model with stats, both or none:
     * the statistics it keeps, to be moved in place by a fast-forward of
     * one part (part k's are those of stat type GM_STAT_SMALL + k, and the
     * GM_STAT_ALL ones their sums: the fast-forward keeps those the sums
     * after every event, their peaks with them); and ff_part_stats, which
     * keeps in d (the growth of the statistics over a stretch of both
     * parts' events) only what part `part`'s events added. */
    gm_alloc_stats *(*ff_part_stats_live)(gm_alloc *a);
    void (*ff_part_stats)(gm_alloc *a, int part, gm_alloc_stats *d);
    /* 1: free() changes nothing but the model's own state (no driver call,
     * no hook, no counter that destroy() or a report reads afterwards), and
     * destroy() frees every block, live or not. The engine then skips the
     * model's frees of what is still live when a tenant ends (the policy is
     * still told, on_tensor): the allocator is destroyed next, so they
     * could change no result, and a trace that ends with a million live
     * blocks would pay a million merges for nothing. 0: every live block is
     * freed first, in no set order. */
    int free_is_local;
    /* Optional, a hint that never changes a result: live allocation
     * `handle` will soon be freed. deep 0: bring the model's record of it
     * into the cache (it may not be there; nothing of it is read); deep 1:
     * that record is read (it is in the cache by now) and what a free of
     * it reads through it is brought in (its segment, its neighbours).
     * Several tenants' stretches (engine.c) ask a few events ahead, where
     * each tenant's model is cold in the cache when its turn comes. */
    void (*prefetch_free)(gm_alloc *a, uint64_t handle, int deep);
    /* Optional: the classic (not expandable) segments of segments() by
     * pool and size, one gm_seg_class each with its count (none of 0), in
     * (small_pool, size) order, filling up to cap and returning how many
     * there are. They change only with a driver call (segment_at's
     * promise), so a model keeps them as segments come and go, and a
     * policy that counts busy segments from releasable() alone
     * (predictive) takes them after a driver call instead of a view of
     * every segment. SIZE_MAX when the model could not keep them (out of
     * memory). A model that has it has segment_at. */
    size_t (*class_counts)(gm_alloc *a, gm_seg_class *buf, size_t cap);
    /* Optional, with class_counts: of each of its classes (the same, in its
     * order), how many segments are one free block now (releasable: in
     * releasable()), into free[k], and of those how many were last used
     * after since_ns (last_use_ns > since_ns), into since[k]; returns how
     * many classes there are (filling up to cap), or SIZE_MAX when the model
     * cannot say: then a policy counts them from releasable() (predictive,
     * every timer tick), looking each one's class up. */
    size_t (*class_free)(gm_alloc *a, uint64_t since_ns, uint32_t *free, uint32_t *since,
                         size_t cap);
    /* Optional: the segments of segments() that are one free block and not
     * expandable (PyTorch's free blocks that are not split, all that its
     * garbage collection and release_available_cached_blocks look at), as
     * segments() shows them but in any order, filling up to cap and
     * returning how many there are. NULL means releasable() filtered; a
     * model that keeps them at hand need not build the views of its
     * expandable segments, thousands of blocks each, on every grow. */
    size_t (*whole_free)(gm_alloc *a, gm_seg_info *buf, size_t cap);
    /* Optional, with briefs: the model's own array of what briefs(a, 1,
     * ...) would copy, the same briefs in the same order, *n of them; it
     * holds until the model's next change (a malloc, free, release, grow
     * or empty_cache) and is read only. NULL when the model has no such
     * array now (then briefs() copies): a policy that reads the releasable
     * segments on every timer tick (predictive) reads them in place. */
    const gm_seg_brief *(*releasable_briefs)(gm_alloc *a, size_t *n);
} gm_alloc_ops;

/* ff_part_state's parts (and ff_clock's clocks: one each). */
#define GM_FF_PARTS 2

/* What a model with ff_part_state keeps per part while ff_on: its share
 * of ff_live, and its requested and allocated bytes (a->c's Q and A);
 * and always: the driver calls that made or gave back one of its
 * segments (the other part's leave its segments, and so its cycles'
 * handles, as they were). */
typedef struct gm_ff_part {
    uint64_t live, requested, allocated;
    uint64_t driver;
} gm_ff_part;

/* ff_clock's clocks at most. */
#define GM_FF_CLOCKS 2

/* The per-pool gm_stat arrays of gm_alloc_stats (they come first, each
 * GM_STAT_TYPES long), then the other gm_stat members: as an array. */
#define GM_ALLOC_N_STAT_ARRAYS                                                                     \
    (offsetof(gm_alloc_stats, oversize_allocations) / (GM_STAT_TYPES * sizeof(gm_stat)))
_Static_assert(offsetof(gm_alloc_stats, oversize_allocations) ==
                   9 * GM_STAT_TYPES * sizeof(gm_stat),
               "gm_alloc_stats: its per-pool arrays first");
#define GM_ALLOC_N_STATS (offsetof(gm_alloc_stats, num_alloc_retries) / sizeof(gm_stat))
_Static_assert(offsetof(gm_alloc_stats, num_alloc_retries) == 29 * sizeof(gm_stat),
               "gm_alloc_stats: its gm_stat members first, then the counts");

struct gm_alloc {
    const gm_alloc_ops *ops;
    void *impl;
    gm_device *dev;
    struct gm_policy *policy; /* release policy (not owned); never NULL */
    gm_alloc_counters c;
    gm_alloc_limits limits;
    void (*seg_hook)(void *ctx, const gm_seg_event *ev); /* optional */
    void *seg_hook_ctx;
    int tenant;        /* index within the run, for multi-tenant scope */
    int torch_version; /* GM_TORCH_* (traces/alloc_conf.h) whose rules parse the
                          settings; 0 = the newest. Set before create(). */
    /* 1: nobody will read ops->stats (set after create(), before the first
     * operation): a model may skip keeping the statistics that change with
     * every malloc and free, and ops->stats then answers with what is left */
    int no_stats;
    /* A model with ff_state keeps here, while ff_on, the sum of
     * gm_ff_block_mix over the blocks it allocated (less those it freed)
     * since, updated on every malloc and free: with the driver
     * calls it is the key that proposes a state the fast-forward has seen
     * before (sim/ffwd.h); ff_state decides. */
    uint64_t ff_live;
    int ff_on; /* 1 while a fast-forward reads ff_live: only then is it kept */
    gm_ff_part ff_part[GM_FF_PARTS]; /* with ff_part_state, while ff_on */
};

/* One allocated block's share of gm_alloc.ff_live: its address, size,
 * request and category in one word, multiplied (a product, so that two
 * blocks that trade places change the sum). */
static inline uint64_t gm_ff_block_mix(uint64_t addr, uint64_t size, uint64_t req, uint8_t cat)
{
    return (addr ^ size << 21 ^ req << 42 ^ cat) * 0x9e3779b97f4a7c15ull;
}

/* The registry (alloc_registry.c). */
const gm_alloc_ops *gm_alloc_find(const char *name); /* NULL if unknown */
const char *gm_alloc_names(void);                    /* "pytorch, direct, cuda-async, ..." */
const gm_alloc_ops *gm_alloc_at(size_t i);           /* i-th model, NULL past the end */

/* Create an allocator instance asking `policy` (required; it must outlive
 * the instance) what to release. memory_fraction 0 = unset (PyTorch's
 * torch.cuda.set_per_process_memory_fraction). */
int gm_alloc_create(const gm_alloc_ops *ops, gm_device *dev, const char *conf,
                    double memory_fraction, struct gm_policy *policy, gm_alloc **out, gm_err *err);
/* The same, with the settings parsed as PyTorch torch_version (GM_TORCH_*,
 * 0 = the newest) parses them. */
int gm_alloc_create_for(const gm_alloc_ops *ops, gm_device *dev, const char *conf,
                        int torch_version, double memory_fraction, struct gm_policy *policy,
                        gm_alloc **out, gm_err *err);
void gm_alloc_destroy(gm_alloc *a);

/* Convenience wrappers used by policies (view the instance). */
static inline size_t gm_alloc_segments(gm_alloc *a, gm_seg_info *buf, size_t cap)
{
    return a->ops->segments(a, buf, cap);
}
static inline uint64_t gm_alloc_release(gm_alloc *a, uint64_t id, uint64_t now_ns)
{
    return a->ops->release(a, id, now_ns);
}
/* The brief of a view. */
static inline gm_seg_brief gm_seg_brief_of(const gm_seg_info *s)
{
    return (gm_seg_brief){s->id,         s->addr,        s->size,       s->last_use_ns,
                          s->releasable, s->n_allocated, s->small_pool, s->expandable};
}
/* Bytes of a live allocation's block, as allocated_bytes counts them: the
 * model's block_bytes, or (it is optional) block_size of the request. */
static inline uint64_t gm_alloc_block_bytes(gm_alloc *a, uint64_t handle, uint64_t requested)
{
    return a->ops->block_bytes ? a->ops->block_bytes(a, handle) : a->ops->block_size(a, requested);
}

/* restore() for a model that cannot rebuild another allocator's cache: the
 * live blocks of rows are allocated through a->ops->malloc in address
 * order, as if the process had allocated them before the trace began;
 * segment and mapped-range rows (the recorded allocator's cache) are
 * skipped. GM_EOOM naming the block that does not fit. */
int gm_alloc_restore_live(gm_alloc *a, const gm_init_row *rows, size_t n, uint64_t *handles,
                          gm_err *err);

/* Driver calls through the device, with accounting and the hook. Used by models. */
int gm_alloc_driver_malloc(gm_alloc *a, uint64_t bytes, uint64_t stream, uint64_t now_ns,
                           uint64_t *dptr);
void gm_alloc_driver_free(gm_alloc *a, uint64_t dptr, uint64_t bytes, uint64_t stream,
                          uint64_t now_ns);
int gm_alloc_driver_map(gm_alloc *a, uint64_t va, uint64_t bytes, uint64_t stream, uint64_t now_ns);
void gm_alloc_driver_unmap(gm_alloc *a, uint64_t va, uint64_t bytes, uint64_t stream,
                           uint64_t now_ns);

#endif
