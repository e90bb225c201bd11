/* outfile.c - see outfile.h. */
#define _GNU_SOURCE /* fdopen on a dup'd descriptor, O_CLOEXEC */
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LINKS 40 /* as the kernel's ELOOP limit */

/* The descriptor a path names directly ("-", /dev/stdout, /dev/fd/N,
 * /proc/self/fd/N), or -1. */
static int named_fd(const char *p)
{
    if (!strcmp(p, "-") || !strcmp(p, "/dev/stdout")) return 1;
    if (!strcmp(p, "/dev/stderr")) return 2;
    const char *n = !strncmp(p, "/dev/fd/", 8)          ? p + 8
                    : !strncmp(p, "/proc/self/fd/", 14) ? p + 14
                                                        : NULL;
    if (!n || !*n) return -1;
    char *end;
    long v = strtol(n, &end, 10);
    return *end || v < 0 || v > INT_MAX ? -1 : (int)v;
}

/* dir of p + "/" + rel (a relative symlink's target), into out. */
static int join_link(const char *p, const char *rel, char *out, size_t len)
{
    if (rel[0] == '/') return snprintf(out, len, "%s", rel) < (int)len ? 0 : -1;
    const char *slash = strrchr(p, '/');
    int dir = slash ? (int)(slash - p) + 1 : 0;
    return snprintf(out, len, "%.*s%s", dir, p, rel) < (int)len ? 0 : -1;
}

int gm_out_plan_make(const char *path, gm_out_plan *p, gm_err *err)
{
    memset(p, 0, sizeof *p);
    p->fd = -1;
    if (!path || !*path) return gm_errf(err, GM_EINVAL, "no output file name given");
    char cur[PATH_MAX], next[PATH_MAX], link[PATH_MAX];
    if (snprintf(cur, sizeof cur, "%s", path) >= (int)sizeof cur)
        return gm_errf(err, GM_EINVAL, "%.200s...: the output path is too long", path);
    struct stat st;
    int exists = 0;
    for (int hops = 0;; hops++) {
        int fd = named_fd(cur);
        if (fd >= 0) {
            if (fcntl(fd, F_GETFD) < 0)
                return gm_errf(err, GM_EINVAL, "%s: descriptor %d is not open", path, fd);
            p->fd = fd;
            return GM_OK;
        }
        if (hops == MAX_LINKS)
            return gm_errf(err, GM_EINVAL, "%s: too many levels of symbolic links", path);
        if (lstat(cur, &st) != 0) {
            if (errno != ENOENT) return gm_errf(err, GM_EIO, "%s: %s", path, strerror(errno));
            break; /* a new file (perhaps at the end of a dangling link) */
        }
        if (!S_ISLNK(st.st_mode)) {
            exists = 1;
            break;
        }
        ssize_t n = readlink(cur, link, sizeof link - 1);
        if (n < 0) return gm_errf(err, GM_EIO, "%s: %s", path, strerror(errno));
        link[n] = 0;
        if (join_link(cur, link, next, sizeof next))
            return gm_errf(err, GM_EINVAL, "%s: a symbolic link leads to a path too long", path);
        memcpy(cur, next, sizeof cur);
    }
    if (exists && S_ISDIR(st.st_mode))
        return gm_errf(err, GM_EINVAL, "%s: is a directory; give a file name", path);
    p->target = strdup(cur);
    if (!p->target) return gm_errf(err, GM_ENOMEM, "out of memory");
    if (exists && !S_ISREG(st.st_mode)) return GM_OK; /* a device node, a FIFO: direct */
    size_t len = strlen(cur) + 32;
    p->tmp = malloc(len);
    if (!p->tmp) {
        gm_out_plan_free(p);
        return gm_errf(err, GM_ENOMEM, "out of memory");
    }
    snprintf(p->tmp, len, "%s.tmp.%d", cur, (int)getpid());
    return GM_OK;
}

void gm_out_plan_free(gm_out_plan *p)
{
    if (!p) return;
    free(p->target);
    free(p->tmp);
    p->target = p->tmp = NULL;
    p->fd = -1;
}

int gm_out_plan_publish(const gm_out_plan *p, const char *path, gm_err *err)
{
    if (!p->tmp) return GM_OK;
    struct stat st;
    if (stat(p->target, &st) == 0 && S_ISREG(st.st_mode)) chmod(p->tmp, st.st_mode & 07777);
    if (rename(p->tmp, p->target) != 0)
        return gm_errf(err, GM_EIO, "%s: cannot move %s into place: %s", path, p->tmp,
                       strerror(errno));
    return GM_OK;
}

static void out_free(gm_outfile *o)
{
    gm_out_plan_free(&o->plan);
    free(o->path);
    memset(o, 0, sizeof *o);
}

static void (*temp_hook)(void *ctx, const char *tmp);
static void *temp_hook_ctx;

void gm_out_set_temp_hook(void (*fn)(void *ctx, const char *tmp), void *ctx)
{
    temp_hook = fn;
    temp_hook_ctx = ctx;
}

int gm_out_open(gm_outfile *o, const char *path, gm_err *err)
{
    memset(o, 0, sizeof *o);
    int rc = gm_out_plan_make(path, &o->plan, err);
    if (rc) return rc;
    o->path = strdup(path);
    if (!o->path) {
        out_free(o);
        return gm_errf(err, GM_ENOMEM, "out of memory");
    }
    int fd;
    if (o->plan.fd == 1) {
        o->f = stdout;
        o->is_stdout = 1;
        return GM_OK;
    }
    if (o->plan.fd >= 0)
        fd = fcntl(o->plan.fd, F_DUPFD_CLOEXEC, 3);
    else if (o->plan.tmp)
        fd = open(o->plan.tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    else
        fd = open(o->plan.target, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0 || !(o->f = fdopen(fd, "w"))) {
        int e = errno;
        if (fd >= 0) close(fd);
        if (o->plan.tmp && fd >= 0) unlink(o->plan.tmp);
        rc = gm_errf(err, GM_EIO, "%s: cannot write: %s%s", path, strerror(e),
                     o->plan.tmp ? " (is the directory there and writable?)" : "");
        out_free(o);
        return rc;
    }
    if (o->plan.tmp && temp_hook) temp_hook(temp_hook_ctx, o->plan.tmp);
    return GM_OK;
}

int gm_out_commit(gm_outfile *o, gm_err *err)
{
    int failed = fflush(o->f) != 0 || ferror(o->f);
    int e = errno;
    if (!o->is_stdout && fclose(o->f) != 0 && !failed) failed = 1, e = errno;
    o->f = NULL;
    int rc = GM_OK;
    if (failed) {
        rc = gm_errf(err, GM_EIO, "%s: cannot write: %s", o->path, strerror(e ? e : EIO));
        if (o->is_stdout) clearerr(stdout);
    } else {
        rc = gm_out_plan_publish(&o->plan, o->path, err);
    }
    if (rc && o->plan.tmp) unlink(o->plan.tmp);
    out_free(o);
    return rc;
}

void gm_out_abort(gm_outfile *o)
{
    if (o->f && !o->is_stdout) fclose(o->f);
    if (o->plan.tmp) unlink(o->plan.tmp);
    out_free(o);
}

int gm_out_write_all(const char *path, const void *buf, size_t len, gm_err *err)
{
    gm_outfile o;
    int rc = gm_out_open(&o, path, err);
    if (rc) return rc;
    if (len && fwrite(buf, 1, len, o.f) != len) {
        int e = errno;
        gm_out_abort(&o);
        return gm_errf(err, GM_EIO, "%s: cannot write: %s", path, strerror(e ? e : EIO));
    }
    return gm_out_commit(&o, err);
}

int gm_out_copy_file(const char *src, const char *path, gm_err *err)
{
    FILE *in = fopen(src, "rb");
    if (!in) return gm_errf(err, GM_EIO, "%s: cannot read %s back: %s", path, src, strerror(errno));
    gm_outfile o;
    int rc = gm_out_open(&o, path, err);
    char buf[1 << 16];
    size_t n;
    while (!rc && (n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, o.f) != n)
            rc = gm_errf(err, GM_EIO, "%s: cannot write: %s", path, strerror(errno ? errno : EIO));
    if (!rc && ferror(in)) rc = gm_errf(err, GM_EIO, "%s: cannot read %s back", path, src);
    fclose(in);
    if (rc) {
        if (o.path) gm_out_abort(&o);
        return rc;
    }
    return gm_out_commit(&o, err);
}

int gm_out_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (!a || !b || !strcmp(a, "-") || !strcmp(b, "-")) return 0;
    if (stat(a, &sa) != 0 || stat(b, &sb) != 0) return 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int gm_out_is_stdout(const char *path)
{
    gm_out_plan p;
    if (gm_out_plan_make(path, &p, NULL)) return 0;
    int yes = p.fd == 1;
    gm_out_plan_free(&p);
    return yes;
}
