/*
 * inputs.c - a PyTorch memory snapshot (or an RMM log) wherever gmsim wants
 * a trace: `gmsim run snapshot.pickle --capacity 24GiB` imports it exactly
 * as `gmsim import` would, into a private temporary folder, and replays the
 * result. The folder and its traces are removed when gmsim exits, also on
 * SIGINT, SIGTERM and SIGHUP; so are the temporary files of the traces gen,
 * import and scale write (gm_cli_remove_on_exit: a killed `gmsim gen` leaves
 * no TARGET.tmp.<pid> behind; a finished one has renamed it already). Results and messages name the
 * snapshot, not the temporary file (gm_tenant_spec.name).
 *
 * The temporary files are the CLI's own state (one process, one list), so
 * it lives here, in the executable, not in a library.
 */
#include "cli.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "traces/import_rmm.h"
#include "traces/import_torch.h"

#define MAX_TEMP 64

static char temp_dir[4096];
static char temp_files[MAX_TEMP][4200];
static volatile sig_atomic_t n_temp;

static void remove_temp(void)
{
    for (sig_atomic_t i = 0; i < n_temp; i++)
        unlink(temp_files[i]); /* async-signal-safe, like rmdir */
    if (temp_dir[0]) rmdir(temp_dir);
}

static void on_signal(int sig)
{
    remove_temp();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_handlers(void)
{
    static int installed; /* the executable's own state, once */
    if (installed++) return;
    atexit(remove_temp);
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old;
        /* a signal ignored when gmsim started stays ignored (nohup, a
         * background job's SIGINT), as shells expect */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        signal(sigs[i], on_signal);
    }
}

void gm_cli_remove_on_exit(void *ctx, const char *path)
{
    (void)ctx;
    if (n_temp >= MAX_TEMP) return; /* then only the writer's own cleanup */
    install_handlers();
    snprintf(temp_files[n_temp], sizeof temp_files[0], "%s", path);
    n_temp++; /* after the name is complete: a signal sees it whole or not at all */
}

static int make_temp_dir(gm_err *err)
{
    if (temp_dir[0]) return GM_OK;
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    snprintf(temp_dir, sizeof temp_dir, "%s/gmsim-XXXXXX", tmp);
    if (!mkdtemp(temp_dir)) {
        temp_dir[0] = 0;
        return gm_errf(err, GM_EIO, "cannot create a temporary folder under %s; set TMPDIR", tmp);
    }
    install_handlers();
    return GM_OK;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

const char *gm_cli_sniff(const char *path)
{
    unsigned char sig[256] = {0};
    struct stat st;
    if (stat(path, &st) != 0) return "missing"; /* the reader or importer names the error */
    /* never opened: opening a FIFO blocks (or wakes its writer), a device
     * may be endless; the reader refuses it by name */
    if (!S_ISREG(st.st_mode)) return "special";
    FILE *f = fopen(path, "rb");
    if (!f) return "missing"; /* the reader or importer names the error */
    size_t n = fread(sig, 1, sizeof sig, f);
    fclose(f);
    if (n >= 8 && !memcmp(sig, "\x89HDF\r\n\x1a\n", 8)) return "hdf5";
    if (n >= 6 && !memcmp(sig, "Thread", 6)) return "rmm"; /* a CSV log starts with its header */
    /* a pickle: protocol 2+ starts with PROTO (0x80); older ones are known by name */
    if ((n >= 1 && sig[0] == 0x80) || ends_with(path, ".pickle") || ends_with(path, ".pkl"))
        return "torch";
    /* text whose first line has commas: a CSV that is not an RMM log */
    size_t i = 0, commas = 0;
    for (; i < n && sig[i] != '\n'; i++) {
        if (sig[i] == ',') commas++;
        if (sig[i] < 0x20 && sig[i] != '\t' && sig[i] != '\r') break;
    }
    if (commas && i < n && sig[i] == '\n') return "csv";
    return "other"; /* the trace reader says what it is not */
}

/* Import path (a snapshot of one device, or an RMM log) into the
 * temporary folder; *trace = the new trace's path. */
static int import_one(const char *path, const char *kind, const char **trace, gm_err *err)
{
    gm_import_trace *t = NULL, rmm;
    gm_torch_import *imp = NULL;
    int rc;
    if (!strcmp(kind, "rmm")) {
        gm_rmm_opts o = {.name = path, .command = "gmsim (imported for this run)"};
        if ((rc = gm_rmm_import_file(path, &o, &rmm, err))) return rc;
        t = &rmm;
    } else {
        gm_torch_opts o = {.name = path, .command = "gmsim (imported for this run)", .device = -1};
        if ((rc = gm_torch_import_file(path, &o, &imp, err))) return rc;
        if (imp->n + imp->n_failed > 1) {
            char list[256] = "";
            for (size_t i = 0; i < imp->n; i++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", i ? ", " : "",
                         imp->dev[i].device);
            rc = gm_errf(err, GM_EINVAL,
                         "%s holds the traces of several devices (%s); replay one: "
                         "'gmsim import --device N %s -o devN.h5', then give devN.h5",
                         path, list, path);
            gm_torch_import_free(imp);
            return rc;
        }
        t = &imp->dev[0];
    }
    if (n_temp >= MAX_TEMP)
        rc = gm_errf(err, GM_EINVAL, "more than %d snapshots at once", MAX_TEMP);
    if (!rc) rc = make_temp_dir(err);
    if (!rc) {
        const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        char *name = temp_files[n_temp];
        snprintf(name, sizeof temp_files[0], "%s/%d-%s.h5", temp_dir, (int)n_temp, base);
        n_temp++; /* registered before it exists: an interrupted write is removed too */
        rc = gm_import_trace_write(t, name, NULL, err);
        *trace = name; /* static: lives until exit, like the file */
    }
    if (imp)
        gm_torch_import_free(imp);
    else
        gm_import_trace_free(&rmm);
    return rc;
}

int gm_cli_input_trace(const char *path, const char **trace, gm_err *err)
{
    *trace = path;
    const char *kind = gm_cli_sniff(path);
    if (!strcmp(kind, "csv"))
        return gm_errf(err, GM_EINVAL,
                       "%s is a CSV file, but not an RMM log (RMM's log starts with the header "
                       "Thread,Time,Action,Pointer,Size,Stream); if it is one, import it with "
                       "'gmsim import --format rmm %s -o t.h5'",
                       path, path);
    if (strcmp(kind, "torch") && strcmp(kind, "rmm")) return GM_OK;
    const char *tmp = NULL;
    int rc = import_one(path, kind, &tmp, err);
    if (rc == GM_OK) *trace = tmp;
    return rc;
}

int gm_cli_resolve_tenants(gm_run_opts *o, gm_err *err)
{
    for (size_t i = 0; i < o->n_tenants; i++) {
        gm_tenant_spec *t = &o->tenants[i];
        if (t->events) continue;
        const char *trace;
        int rc = gm_cli_input_trace(t->path, &trace, err);
        if (rc) return rc;
        if (trace != t->path) {
            t->name = t->path;
            t->path = trace;
        }
    }
    return GM_OK;
}
