/*
 * ffwd.h - fast-forward: the iterations of a training loop, once one
 * repeats another already simulated from the same allocator state, are
 * applied from a record instead of being simulated again.
 *
 * Why it is exact. The allocator's decisions depend on its state (which
 * segments it holds, which blocks are allocated or free, the order of the
 * lists a decision walks: gm_alloc_ops.ff_state) and on the calls made to
 * it, not on the time. A cycle is a stretch of events that starts and
 * ends in the same state, word for word, with no driver call, OOM or
 * policy call in between. From that state, the same calls again (op,
 * size, stream, category, and each free naming the same block: one the
 * stretch allocated, or one that lived before it at the same address)
 * make the same decisions: the same blocks at the same addresses, the
 * same Q and A after every event, and the same state at the end. So the
 * record of the first stretch (Q, A and the largest free block after each
 * event, the blocks it leaves live, the segments it used) is the second's
 * too; only the times differ, and the metrics are stepped with the new
 * times, event by event, as the engine does (sim/metrics.h). What a
 * policy could read later, a segment's last use, is set as the stretch's
 * last event there would have set it (gm_alloc_ops.ff_touch).
 *
 * How cycles are found. The model keeps a hash of its allocated blocks
 * (gm_alloc.ff_live); with the driver-call counts it is the key of a
 * state. About one state in 64 (by its key) is a checkpoint, so the same
 * states are checkpoints in every iteration, and a check costs a
 * multiply on most events. At a checkpoint the key goes into a table of
 * recent checkpoints; a key seen three times, at the same distance P >=
 * GM_FF_MIN events apart, makes its state a known state: the model writes
 * it out (ff_state), and the events from there are simulated and recorded
 * until the model is back in it (the key first, then word for word),
 * which makes the stretch a cycle of that state. From then on, at that
 * state, the events ahead are checked against each of its cycles (nothing
 * changes until one matches whole) and the matching one is applied, which
 * leaves the model in the state again. When none matches (an iteration of
 * another shape), the events are simulated without recording until the
 * model is back in the state (a probe), and the next stretch that matches
 * no cycle is recorded as another: a trace whose states do not come back
 * pays for no recording. A key only proposes: the word-for-word
 * comparison decides, so a collision costs time, never a wrong answer.
 *
 * Where it applies: one tenant on the engine's plain path (engine.c,
 * plain(): allocations by id, no hook, no tier or chain), a model with
 * the ff_* members (pytorch), a policy without a timer, admit or
 * on_tensor (pytorch, lru, priority: they are asked only when the model
 * grows, which a cycle never does), and a model configuration whose state
 * ff_state writes out. What a cycle changes besides its events' blocks is
 * moved as it would move it: the segments' last use and GC ages
 * (ff_touch, ff_clock, ff_seg_age: PyTorch's garbage collection decides
 * only when the model grows, but by ages the cycle moves on), and the
 * cumulative statistics (ff_stats). gm_sim_config.no_fast_forward turns
 * it off; tests/test_ffwd.c holds runs with it to the same results as
 * runs without.
 *
 * One part. A trace whose whole state never comes back may still have a
 * part that does: with dynamic padding (a new sequence length every
 * iteration) PyTorch's small pool never returns to a state (the loss and
 * the batch's small tensors live across the iteration's end, somewhere
 * else each time), but its large pool does, at every iteration's start,
 * once the cache has stopped growing (bench/README, "Tenth round"). The
 * model's parts (gm_alloc_ops.ff_part_state: the pools) are independent
 * while no driver call, policy call or garbage collection happens: what a
 * served malloc or a free of one part does reads and changes that part
 * only. So when the whole state has not come back for GM_FF_PATIENCE
 * events, the search starts again on the large pool alone, then on the
 * small pool alone (then the whole model again, with more patience): a
 * state is the part's state, a cycle the part's events (the others
 * interleaved), and each of the part's events is a checkpoint (its states
 * come back only at iteration starts, too few for one in 64). Applying a
 * cycle of part X walks its window (the events from here to X's last) in
 * order: X's events take their Q, A and largest free block from the
 * record (each figure the model's now, less X's at the start, plus X's
 * recorded one), the others are simulated (gm_alloc_ops.ff_part_malloc
 * and free), and the metrics step per event with the sums, as the engine
 * steps them. Should an event of the others need the model to grow
 * (ff_part_malloc declines), X's events before it are simulated there and
 * then (their decisions are X's own), and the engine takes it from there.
 * A cycle whose window was walked whole before is walked without a check
 * first, each of X's events compared with the record as it comes; at the
 * first that differs X's events before it are simulated the same way, and
 * the model is probed from there (the next window of that cycle is
 * checked whole before it is walked).
 * PyTorch's statistics, when kept, move the same way: X's pool's figures
 * are the record's (a row of them per X event), the all-pools figures are
 * kept the sums after every event, their peaks with them
 * (ff_part_stats_live), and X's share of the cumulative figures is added
 * at the end (ff_part_stats). Records of one part are made only while
 * they pay (ffwd.c, may_record): under pressure its states last a few
 * iterations at a time.
 *
 * Memory: at most GM_FF_STATES known states (each ff_state's words) and
 * GM_FF_BUDGET recorded events (~70 bytes each), the least recently used
 * dropped first. A state of more than GM_FF_STATE_PER_EVENT words per
 * event of the period that proposed it (plus GM_FF_STATE_WORDS) is not
 * kept, nor written out past that (a million cached blocks: checking it
 * would cost more than its cycles save, and had made such a run 1.6x
 * slower than simulating it).
 *
 * Engine-internal: engine.c owns the tenant's id slots and metrics and
 * lends them (gm_ff_tenant).
 */
#ifndef GM_FFWD_H
#define GM_FFWD_H

#include <stddef.h>
#include <stdint.h>

#include "alloc.h"
#include "metrics.h"
#include "traces/trace.h"

#define GM_FF_MIN 16             /* shortest cycle made a record (events)           */
#define GM_FF_MAX (1u << 18)     /* longest: a record or probe not back by then ends */
#define GM_FF_BUDGET (1u << 18)  /* recorded events kept, all records together      */
#define GM_FF_CARRY (1u << 16)   /* longest cycle checked across a chunk's end       */
#define GM_FF_STATES 8           /* known states kept                               */
#define GM_FF_RECS 64            /* cycles kept per known state                     */
#define GM_FF_TABLE 4096         /* recent checkpoints' keys                        */
#define GM_FF_LOCAL (1ull << 63) /* an id slot holding a stretch's own allocation   */
/* events seeking without a record made or a cycle applied, after which
 * fast-forward seeks on the next part of the model (the whole model, the
 * large pool, the small pool, the whole model again, ...), in rounds of
 * twice the patience of the one before; after the round of 4 times
 * GM_FF_PATIENCE it gives up for the run (and the model stops keeping its
 * key): a trace whose states never come back pays for the search only so
 * long. GM_FF_MAX first: a cycle as long as GM_FF_MAX / 3 is found in the
 * first round (a key seen three times, then the record), the longest kept
 * in the last */
#define GM_FF_PATIENCE GM_FF_MAX
/* a known state is at most GM_FF_STATE_PER_EVENT words per event of the
 * period that proposed it, plus GM_FF_STATE_WORDS (ffwd.c, state_most) */
#define GM_FF_STATE_PER_EVENT 64
#define GM_FF_STATE_WORDS (1u << 16)

enum gm_ff_mode {
    GM_FF_SEEK = 0,   /* looking for a state that comes back                     */
    GM_FF_RECORD = 1, /* simulating from a known state, recording, until back    */
    GM_FF_PROBE = 2,  /* simulating from a known state, not recording, until back */
    GM_FF_AT = 3,     /* the model is in a known state: try its cycles           */
    GM_FF_OFF = 4,    /* given up for the run (GM_FF_PATIENCE's last round)       */
};

/* What the engine lends a replay: its tenant's allocator, metrics and id
 * slots (engine.c: handle + 1 per live id, the address its free repeats). */
typedef struct gm_ff_tenant {
    gm_alloc *a;
    gm_metrics *m;
    uint64_t *slot, *slot_addr;
    size_t n_slot;
    uint64_t shift; /* device time = trace time + shift          */
    uint64_t done;  /* events the tenant has done before these */
    /* one part: the engine's peak of the model's allocated bytes, which
     * the other part's events may raise (engine.c, tenant_step_metrics) */
    uint64_t *peak_allocated;
} gm_ff_tenant;

typedef struct gm_ff_rec gm_ff_rec;     /* a cycle (ffwd.c)       */
typedef struct gm_ff_state gm_ff_state; /* a known state (ffwd.c) */

/* The record being made: one entry per event (alloc or free). */
typedef struct gm_ff_buf {
    size_t n, cap;
    uint8_t *op, *cat;
    uint64_t *size, *stream;
    uint64_t *ref;        /* free: GM_FF_LOCAL | j (the stretch's j-th allocation), or the
                             address of a block that lived before the stretch */
    uint64_t *q, *a, *lf; /* after the event */
    uint64_t *seg;        /* the segment it used (ff_segment) */
    size_t n_alloc, cap_alloc;
    uint64_t *handle; /* per allocation: its handle, 0 once freed */
    /* one part, statistics kept: after each event the part's figures of
     * each per-pool statistic (GM_ALLOC_N_STAT_ARRAYS a row), n_cur rows */
    uint64_t *cur;
    size_t n_cur, cap_cur;
} gm_ff_buf;

typedef struct gm_ff_check {
    uint64_t key, at, period;
} gm_ff_check;

typedef struct gm_ffwd {
    int mode; /* enum gm_ff_mode */
    /* -1: the whole model; else the part (gm_alloc_ops.ff_part_state)
     * whose events are fast-forwarded, the others' simulated */
    int part;
    int parts_ok;                    /* the model and run allow one part (gm_ffwd_new) */
    uint64_t patience, patience_max; /* this round's, the last round's (GM_FF_PATIENCE) */
    /* events the tenant had done when the engine last left the plain path:
     * anything else that ran since (step(), a pass's end) ends a record */
    uint64_t expect;
    uint64_t clock;  /* for least recently used */
    gm_ff_state *at; /* RECORD, PROBE, AT: the state                    */
    int probed;      /* the model came back to the state simulating since the
                        last record was made: a stretch no cycle matches is
                        worth recording */
    size_t need;     /* AT, gm_ffwd_apply returned 0: a cycle may match the
                        events ahead but is longer than what was given */
    uint64_t since;  /* RECORD, PROBE: events the tenant had done at the start */
    uint64_t hope;   /* events done when a record was last made or a cycle
                        applied (or the search began) */
    gm_ff_check tab[GM_FF_TABLE];
    gm_ff_state *states[GM_FF_STATES];
    size_t n_states;
    size_t kept_events;     /* in every record */
    uint32_t backoff, skip; /* candidates passed over after failures */
    gm_ff_buf rec;          /* RECORD */
    /* recording: id -> its allocation in rec, stamped with the record's number */
    uint64_t *local_of;
    size_t n_local_of;
    uint32_t gen;
    uint64_t *scratch; /* a state written out, to compare */
    size_t cap_scratch;
    /* the words of the last new state written out, per part (0: the
     * whole model; 1 + part), for state_most */
    size_t state_words[1 + GM_FF_PARTS];
    /* a replay's scratch (check): ids of its allocations, and per event
     * that frees a block that lived before it, what the id slot held */
    uint32_t *ids;
    uint64_t *hin;
    size_t cap_replay;
    /* one part's window: the index of the part's k-th event, the
     * handles of its allocations once simulated */
    uint32_t *xpos;
    uint64_t *loc;
    size_t cap_window;
    uint64_t memo_size[64]; /* ff_part_of's answers: size + 1 (0: none) ... */
    uint8_t memo_part[64];  /* ... and its part */
    /* figures (bench/gmbench) */
    uint64_t events_applied, cycles_applied, records_made, records_failed;
    uint64_t recorded; /* events recorded, records kept or not (may_record) */
} gm_ffwd;

/* A fast-forward for allocator a, or NULL when a cannot be fast-forwarded
 * (no ff_* members, or ff_state makes no promise in its configuration)
 * or memory is short (then nothing is fast-forwarded: the same results). */
gm_ffwd *gm_ffwd_new(gm_alloc *a);
void gm_ffwd_free(gm_ffwd *f);

/* The first round's patience (GM_FF_PATIENCE's; tests: shorter). */
void gm_ffwd_set_patience(gm_ffwd *f, uint64_t events);

/* Something outside the plain path ran (step(), a pass's end): a record
 * in the making is dropped, and the state is no longer known. */
void gm_ffwd_reset(gm_ffwd *f);

/* Whole model: whether the state the model is in now is a checkpoint
 * (about one in 64; the same states in every iteration). Inline: after
 * every plain event while seeking, recording or probing. (One part: each
 * of the part's events is one, gm_ffwd_part_event.) */
static inline int gm_ffwd_checkpoint(const gm_alloc *a)
{
    return (a->ff_live * 0xc2b2ae3d27d4eb4full) >> 58 == 0;
}

/* One part (f->part >= 0): whether the block `handle` (live: just
 * allocated, or about to be freed) is the part's. */
static inline int gm_ffwd_part_event(const gm_ffwd *f, gm_alloc *a, uint64_t handle)
{
    return a->ops->ff_part_block(a, handle) == f->part;
}

/* Seeking, at a checkpoint (`done` events into the tenant): 1 when the
 * model is now in a known state (mode AT) or starts recording from a new
 * one (mode RECORD): the caller stops. */
int gm_ffwd_seek(gm_ffwd *f, gm_alloc *a, const gm_metrics *m, uint64_t done);

/* Recording, per event (one part: per event of the part): an allocation that got `handle`; a free
 * of `handle`, before the model frees it; then, after the event ran and the metrics stepped,
 * gm_ffwd_rec_post, which returns 1 when the recording ended (back in its state: mode AT; or given
 * up: mode SEEK). */
void gm_ffwd_rec_alloc(gm_ffwd *f, gm_alloc *a, const gm_event *e, uint64_t handle);
void gm_ffwd_rec_free(gm_ffwd *f, gm_alloc *a, const gm_event *e, uint64_t handle);
int gm_ffwd_rec_post(gm_ffwd *f, gm_alloc *a, const gm_metrics *m);

/* Probing, at a checkpoint: 1 when the model is back in the state (mode
 * AT) or the probe ran too long (mode SEEK): the caller stops. */
int gm_ffwd_probe(gm_ffwd *f, gm_alloc *a, const gm_metrics *m, uint64_t done);

/* At a known state (mode AT), with n events ahead in ev: apply the cycle
 * they start with, if one matches whole (their id slots, the metrics, the
 * segments' last use: what simulating them would leave), and return its
 * length; the model stays in the state. 0: none applied; then either the
 * mode is still AT and f->need > n (a cycle may match but needs f->need
 * events: give more, or gm_ffwd_cut), or the mode says what next: PROBE
 * or RECORD (no cycle matches: simulate), SEEK (out of memory). */
size_t gm_ffwd_apply(gm_ffwd *f, const gm_event *ev, size_t n, const gm_ff_tenant *t);

/* At a known state, the events ahead cannot all be had (the trace ends
 * first, or the cycle is longer than GM_FF_CARRY): simulate them. */
void gm_ffwd_cut(gm_ffwd *f, const gm_ff_tenant *t);

#endif
