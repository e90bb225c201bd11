/*
 * fake_cupti.c - a stand-in libcupti.so.13 for testing gmcapture's injection
 * library without a GPU. It implements the handful of Activity API calls
 * inject.c makes, with CUPTI's documented semantics (cupti_activity.h):
 * buffers come from the client's request callback and go back through its
 * completion callback from cuptiActivityFlushAll; FLUSH_FORCED also returns
 * the buffer being filled; the dropped count resets when read.
 *
 * The test program produces records through fake_cupti_emit_*; fake_cupti_cut
 * closes the current buffer, and closed buffers are delivered newest first,
 * as CUPTI may deliver them out of order.
 */
#define _GNU_SOURCE /* PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP */
#include <cupti.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FAKE_EXPORT __attribute__((visibility("default")))
#define MAX_BUFS 64
#define BUF_BYTES 65536

typedef struct fbuf {
    _Alignas(8) uint8_t data[BUF_BYTES];
    size_t used;
} fbuf;

/* recursive: the completion callback reads the dropped count while a flush delivers */
static pthread_mutex_t mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static CUpti_BuffersCallbackRequestFunc req_cb;
static CUpti_BuffersCallbackCompleteFunc done_cb;
static fbuf bufs[MAX_BUFS]; /* bufs[ncut] is the one being filled */
static int ncut;
static size_t dropped;
static uint64_t enabled; /* bit per activity kind < 64 */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static size_t rec_size(const CUpti_Activity *r)
{
    switch (r->kind) {
    case CUPTI_ACTIVITY_KIND_MEMORY2:
        return sizeof(CUpti_ActivityMemory4);
    case CUPTI_ACTIVITY_KIND_MARKER:
        return sizeof(CUpti_ActivityMarker2);
    default:
        return 8;
    }
}

FAKE_EXPORT CUptiResult cuptiGetTimestamp(uint64_t *t)
{
    *t = now_ns();
    return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiGetVersion(uint32_t *v)
{
    *v = CUPTI_API_VERSION;
    return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiGetResultString(CUptiResult r, const char **s)
{
    *s = r == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "CUPTI_ERROR (fake)";
    return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                                       CUpti_BuffersCallbackCompleteFunc done)
{
    if (!req || !done) return CUPTI_ERROR_INVALID_PARAMETER;
    req_cb = req;
    done_cb = done;
    return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind)
{
    if ((unsigned)kind < 64) enabled |= 1ull << kind;
    return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream, size_t *n)
{
    (void)ctx;
    (void)stream;
    pthread_mutex_lock(&mu);
    *n = dropped;
    dropped = 0;
    pthread_mutex_unlock(&mu);
    return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t *buf, size_t valid, CUpti_Activity **rec)
{
    if (!buf) return CUPTI_ERROR_INVALID_PARAMETER;
    size_t off = *rec ? (size_t)((uint8_t *)*rec - buf) + rec_size(*rec) : 0;
    if (off >= valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *rec = (CUpti_Activity *)(buf + off);
    return CUPTI_SUCCESS;
}

static void deliver(fbuf *b)
{
    uint8_t *out = NULL;
    size_t size = 0, maxrec = 0;
    if (!b->used) return;
    req_cb(&out, &size, &maxrec);
    if (!out || size < b->used) {
        dropped += b->used / 8;
    } else {
        memcpy(out, b->data, b->used);
        done_cb(NULL, 0, out, size, b->used);
    }
    b->used = 0;
}

FAKE_EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
    pthread_mutex_lock(&mu);
    if (!req_cb) {
        pthread_mutex_unlock(&mu);
        return CUPTI_ERROR_INVALID_OPERATION;
    }
    for (int i = ncut - 1; i >= 0; i--) /* newest first: out of order on purpose */
        deliver(&bufs[i]);
    if (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) {
        deliver(&bufs[ncut]);
    } else if (ncut) { /* the partial buffer stays, as the one being filled */
        bufs[0] = bufs[ncut];
        bufs[ncut].used = 0;
    }
    ncut = 0;
    pthread_mutex_unlock(&mu);
    return CUPTI_SUCCESS;
}

static void put(const void *rec, size_t n)
{
    pthread_mutex_lock(&mu);
    fbuf *b = &bufs[ncut];
    size_t padded = (n + 7) & ~(size_t)7;
    if (b->used + padded > BUF_BYTES && ncut + 1 < MAX_BUFS) b = &bufs[++ncut];
    if (b->used + padded > BUF_BYTES) {
        dropped++;
    } else {
        memcpy(b->data + b->used, rec, n);
        b->used += padded;
    }
    pthread_mutex_unlock(&mu);
}

/* ---- test controls ---- */

FAKE_EXPORT void fake_cupti_emit_mem(int alloc, uint64_t addr, uint64_t bytes, uint32_t device)
{
    CUpti_ActivityMemory4 m;
    if (!(enabled & (1ull << CUPTI_ACTIVITY_KIND_MEMORY2))) return;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    m.memoryOperationType = alloc ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
                                  : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
    m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.address = addr;
    m.bytes = bytes;
    m.timestamp = now_ns();
    m.deviceId = device;
    m.streamId = CUPTI_INVALID_STREAM_ID;
    put(&m, sizeof m);
}

/* name must outlive the capture (CUPTI's names do too) */
FAKE_EXPORT void fake_cupti_emit_marker(uint32_t flags, uint32_t id, const char *name)
{
    CUpti_ActivityMarker2 m;
    if (!(enabled & (1ull << CUPTI_ACTIVITY_KIND_MARKER))) return;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MARKER;
    m.flags = (CUpti_ActivityFlag)flags;
    m.timestamp = now_ns();
    m.id = id;
    m.name = name;
    put(&m, sizeof m);
}

/* Close the buffer being filled; the next records go to a new one. */
FAKE_EXPORT void fake_cupti_cut(void)
{
    pthread_mutex_lock(&mu);
    if (bufs[ncut].used && ncut + 1 < MAX_BUFS) ncut++;
    pthread_mutex_unlock(&mu);
}

FAKE_EXPORT void fake_cupti_drop(size_t n)
{
    pthread_mutex_lock(&mu);
    dropped += n;
    pthread_mutex_unlock(&mu);
}
