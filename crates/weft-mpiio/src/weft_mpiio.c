/*
 * weft_mpiio.c: the Weft MPI-IO layer's entry points. An MPI program gets them by
 * LD_PRELOAD=libweft_mpiio.so or by linking with -lweft_mpiio before the MPI library: they
 * are MPI_File_* functions that call the MPI library's PMPI_File_* ones (the profiling
 * interface), so the program and the MPI library are unchanged.
 *
 * At MPI_File_open of a path under a Weft FUSE mount (a fuse.weft line of
 * /proc/self/mountinfo, whose source names the management service), the file is made with
 * the layout the hints striping_factor / striping_unit / start_iodevice ask (when it is
 * new), opened by the MPI library on the mount as usual, and opened again through libweft
 * (one weft_mount per process, kept until MPI_Finalize). The MPI_File stays the library's:
 * every call this layer does not take goes to it, and sees what libweft wrote, since
 * libweft's I/O and the mount's take the servers' extent locks. The collective calls
 * MPI_File_{write,read}_all and MPI_File_{write,read}_at_all run Weft's two-phase I/O
 * (twophase.c) when the view's filetype is one flatten.c takes; else the library's.
 *
 * Why C: see internal.h.
 *
 * Hints read (MPI_File_open's info, MPI_File_set_info, MPI_File_set_view's info):
 *   striping_factor, striping_unit, start_iodevice   layout of a new file
 *   weft_throttle=N      requests in flight per OST at an aggregator (default: the
 *                        client's max_rpcs_in_flight, `weft set-param -P`, 8 unless set;
 *                        env WEFT_MPIIO_THROTTLE)
 *   cb_buffer_size=B     bytes an aggregator exchanges per step (default 4 MiB; env
 *                        WEFT_MPIIO_CB_BUFFER_SIZE)
 *   cb_nodes=N           at most N aggregators (default: one per OST, at most nprocs; env
 *                        WEFT_MPIIO_CB_NODES)
 *   weft_collective=disable   leave the collective calls to the MPI library
 *   weft_align=disable   domains of even byte ranges, not whole stripes (to measure what
 *                        the alignment gives; env WEFT_MPIIO_ALIGN=0)
 *   weft_rpc_size=B      largest single request of an aggregator (default 1 MiB)
 *   weft_direct=automatic|disable   automatic (the default): when no two ranks' ranges of
 *                        a collective call interleave and its pieces are large, each rank
 *                        does its own I/O through libweft with no exchange (ROMIO's
 *                        romio_cb_write=automatic); disable: always the two phases (env
 *                        WEFT_MPIIO_DIRECT)
 *   weft_placement=ost|rank   ost (default): the K computer's, one aggregator per OST group
 *                        spread over the ranks, owning all the stripes of its OSTs; rank:
 *                        ROMIO's generic one, the first cb_nodes ranks, each a contiguous
 *                        range of the call's extent (boundaries on stripes unless
 *                        weft_align=disable), so every aggregator writes to every OST (env
 *                        WEFT_MPIIO_PLACEMENT)
 *   weft_exchange=stepwise|alltoallv   the data to and from the aggregators by
 *                        Isend/Irecv between the ranks that have some, window by window
 *                        (default), or by one MPI_Alltoallv of the communicator per window
 *                        (env WEFT_MPIIO_EXCHANGE)
 *   weft_io=libweft|mount   the aggregators' reads and writes through libweft (default)
 *                        or by pread/pwrite on the FUSE mount (an experiment: the same
 *                        layer over the mount's page cache and write-back; env
 *                        WEFT_MPIIO_IO)
 *   weft_wait=spin|sleep   wait for the exchange's messages in MPI_Waitall (spin) or
 *                        polling with 50 us sleeps (default when the node has more ranks
 *                        than cores; env WEFT_MPIIO_WAIT)
 * MPI_File_get_info adds what was chosen: weft_layout, weft_aggregators, weft_domains,
 * weft_placement, weft_exchange, weft_io, weft_wait, weft_align, weft_throttle,
 * cb_buffer_size.
 * WEFT_MPIIO_DEBUG=1 prints the same on stderr (rank 0) and a line per collective call;
 * WEFT_MPIIO_DEBUG=2 adds at every rank where the call's time went (plan, packing,
 * exchange, waiting for the I/O; the libweft calls' count, size and time).
 */
#include "internal.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int wm_debug = 0;

/* ---- mounts ---- */

struct wm_mount {
    char *mgs;
    weft_fs *fs;
};
static struct wm_mount *mounts;
static int nmounts;

static void unescape(char *s)
{
    char *o = s;
    while (*s) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '7' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
            *o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
            s += 4;
        } else {
            *o++ = *s++;
        }
    }
    *o = 0;
}

/* The Weft mount `abs` is under: its management service in `mgs`, and the path inside the
 * file system in `inner`. 0 when found. */
static int find_weft_mount(const char *abs, char *mgs, size_t mgs_size, char *inner, size_t inner_size)
{
    FILE *m = fopen("/proc/self/mountinfo", "r");
    if (!m) {
        return -1;
    }
    char line[4096];
    size_t best = 0;
    int found = -1;
    while (fgets(line, sizeof(line), m)) {
        char *sep = strstr(line, " - ");
        if (!sep) {
            continue;
        }
        *sep = 0;
        char fstype[256], source[2048];
        if (sscanf(sep + 3, "%255s %2047s", fstype, source) != 2 || strcmp(fstype, "fuse.weft") != 0) {
            continue;
        }
        char *fields[6] = {0};
        char *save = NULL, *tok = strtok_r(line, " ", &save);
        for (int i = 0; tok && i < 6; i++, tok = strtok_r(NULL, " ", &save)) {
            fields[i] = tok;
        }
        if (!fields[4]) {
            continue;
        }
        char point[PATH_MAX];
        snprintf(point, sizeof(point), "%s", fields[4]);
        unescape(point);
        size_t n = strlen(point);
        while (n > 1 && point[n - 1] == '/') {
            point[--n] = 0;
        }
        int under = strncmp(abs, point, n) == 0 && (abs[n] == '/' || abs[n] == 0 || n == 1);
        if (!under || n < best) {
            continue;
        }
        best = n;
        char *colon = strstr(source, ":/");
        char *last = NULL;
        for (char *c = colon; c; c = strstr(c + 1, ":/")) {
            last = c;
        }
        if (last) {
            *last = 0;
        }
        snprintf(mgs, mgs_size, "%s", source);
        snprintf(inner, inner_size, "%s", n == 1 ? abs : (abs[n] ? abs + n : "/"));
        found = 0;
    }
    fclose(m);
    return found;
}

/* The absolute form of an MPI file name (a ROMIO "fstype:" prefix taken off). */
static void absolute(const char *name, char *out, size_t size)
{
    const char *colon = strchr(name, ':');
    if (colon && colon - name > 1 && !memchr(name, '/', (size_t)(colon - name))) {
        name = colon + 1;
    }
    char joined[PATH_MAX];
    if (name[0] == '/') {
        snprintf(joined, sizeof(joined), "%s", name);
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof(cwd))) {
            cwd[0] = 0;
        }
        snprintf(joined, sizeof(joined), "%s/%s", cwd, name);
    }
    /* The directory through realpath (it exists; the file may not). */
    char dir[PATH_MAX], real[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", joined);
    char *slash = strrchr(dir, '/');
    const char *base = joined + (slash - dir) + 1;
    *slash = 0;
    if (realpath(dir[0] ? dir : "/", real)) {
        size_t n = strlen(real);
        if (n + strlen(base) + 2 > size) {
            snprintf(out, size, "%s", joined);
            return;
        }
        memcpy(out, real, n);
        if (strcmp(real, "/") == 0) {
            n = 0;
        }
        out[n] = '/';
        memcpy(out + n + 1, base, strlen(base) + 1);
    } else {
        snprintf(out, size, "%s", joined);
    }
}

static weft_fs *mount_of(const char *mgs)
{
    for (int i = 0; i < nmounts; i++) {
        if (strcmp(mounts[i].mgs, mgs) == 0) {
            return mounts[i].fs;
        }
    }
    weft_fs *fs = NULL;
    int rc = weft_mount(mgs, &fs);
    if (rc < 0) {
        WM_DEBUG("weft_mount(%s): %s\n", mgs, weft_strerror());
        return NULL;
    }
    mounts = realloc(mounts, sizeof(*mounts) * (size_t)(nmounts + 1));
    mounts[nmounts].mgs = strdup(mgs);
    mounts[nmounts].fs = fs;
    nmounts++;
    return fs;
}

/* ---- the side table: MPI_File -> state ---- */

static struct wm_file **files;
static int nfiles;

static struct wm_file *lookup(MPI_File fh)
{
    for (int i = 0; i < nfiles; i++) {
        if (files[i]->fh == fh) {
            return files[i];
        }
    }
    return NULL;
}

static void forget(struct wm_file *f)
{
    for (int i = 0; i < nfiles; i++) {
        if (files[i] == f) {
            files[i] = files[--nfiles];
            break;
        }
    }
    if (f->fd >= 0) {
        close(f->fd);
        f->fd = -1;
    }
    if (f->wf) {
        weft_close(f->wf);
    }
    if (f->comm != MPI_COMM_NULL) {
        MPI_Comm_free(&f->comm);
    }
    wm_flat_free(&f->ft);
    wm_free_buffers(f);
    free(f->osts);
    free(f->aggr_rank);
    free(f->path);
    free(f);
}

/* ---- hints ---- */

static int64_t hint_int(MPI_Info info, const char *key, int64_t dflt)
{
    if (info == MPI_INFO_NULL) {
        return dflt;
    }
    char v[256];
    int flag = 0;
    MPI_Info_get(info, key, sizeof(v) - 1, v, &flag);
    if (!flag) {
        return dflt;
    }
    char *end;
    long long x = strtoll(v, &end, 10);
    return end == v ? dflt : (int64_t)x;
}

static int hint_disabled(MPI_Info info, const char *key)
{
    if (info == MPI_INFO_NULL) {
        return 0;
    }
    char v[64];
    int flag = 0;
    MPI_Info_get(info, key, sizeof(v) - 1, v, &flag);
    return flag && (strcmp(v, "disable") == 0 || strcmp(v, "false") == 0 || strcmp(v, "0") == 0);
}

/* The index of `values` that `v` names, or `dflt` (v NULL, or no such word). */
static int word_index(const char *v, const char *const *values, int n, int dflt)
{
    for (int i = 0; v && i < n; i++) {
        if (strcmp(v, values[i]) == 0) {
            return i;
        }
    }
    return dflt;
}

/* The value of a hint of words: the index of `values` it names, or `dflt`. */
static int hint_word(MPI_Info info, const char *key, const char *const *values, int n, int dflt)
{
    if (info == MPI_INFO_NULL) {
        return dflt;
    }
    char v[64];
    int flag = 0;
    MPI_Info_get(info, key, sizeof(v) - 1, v, &flag);
    return word_index(flag ? v : NULL, values, n, dflt);
}

static const char *const placements[] = {"ost", "rank"};
static const char *const exchanges[] = {"stepwise", "alltoallv"};
static const char *const ios[] = {"libweft", "mount"};
static const char *const waits[] = {"spin", "sleep"};
static const char *const directs[] = {"disable", "automatic"};

/* The same from the environment (WEFT_MPIIO_PLACEMENT, WEFT_MPIIO_EXCHANGE...). */
static int env_word(const char *name, const char *const *values, int n, int dflt)
{
    return word_index(getenv(name), values, n, dflt);
}

static void take_hints(struct wm_file *f, MPI_Info info)
{
    f->placement = hint_word(info, "weft_placement", placements, 2, f->placement);
    f->exchange = hint_word(info, "weft_exchange", exchanges, 2, f->exchange);
    f->io_mount = hint_word(info, "weft_io", ios, 2, f->io_mount);
    f->wait_sleep = hint_word(info, "weft_wait", waits, 2, f->wait_sleep);
    f->direct = hint_word(info, "weft_direct", directs, 2, f->direct);
    int throttle = (int)hint_int(info, "weft_throttle", f->throttle);
    f->throttle = throttle < 1 ? 1 : throttle > 256 ? 256 : throttle;
    int64_t cb = hint_int(info, "cb_buffer_size", f->cb_buffer_size);
    f->cb_buffer_size = cb < 4096 ? 4096 : cb;
    int64_t rpc = hint_int(info, "weft_rpc_size", f->rpc_size);
    f->rpc_size = rpc < 4096 ? 4096 : rpc;
    f->cb_nodes = (int)hint_int(info, "cb_nodes", f->cb_nodes);
    if (hint_disabled(info, "weft_align")) {
        f->align = 0;
    }
    if (hint_disabled(info, "weft_collective") || hint_disabled(info, "romio_cb_write")) {
        f->enabled = 0;
    }
}

static void debug_init(void)
{
    const char *d = getenv("WEFT_MPIIO_DEBUG");
    wm_debug = d && *d && strcmp(d, "0") != 0 ? (atoi(d) > 1 ? atoi(d) : 1) : 0;
}

static void describe(const struct wm_file *f, char *layout, size_t ls, char *aggr, size_t as, char *dom, size_t ds)
{
    size_t o = (size_t)snprintf(layout, ls, "stripe_count=%lld stripe_size=%lld osts=", (long long)f->stripe_count,
                                (long long)f->stripe_size);
    for (int64_t i = 0; i < f->stripe_count && o < ls; i++) {
        o += (size_t)snprintf(layout + o, ls - o, "%s%llu", i ? "," : "", (unsigned long long)f->osts[i]);
    }
    o = 0;
    aggr[0] = 0;
    for (int a = 0; a < f->naggr && o < as; a++) {
        o += (size_t)snprintf(aggr + o, as - o, "%s%d", a ? "," : "", f->aggr_rank[a]);
    }
    /* domains: for each aggregator, the OSTs whose stripes it owns */
    if (!f->align) {
        snprintf(dom, ds, "contiguous, even byte ranges of each call's extent (weft_align=disable);");
        return;
    }
    if (f->placement == WM_PLACE_RANK) {
        snprintf(dom, ds, "contiguous, whole stripes of each call's extent, every OST to every aggregator "
                          "(weft_placement=rank);");
        return;
    }
    o = (size_t)snprintf(dom, ds, "stripe-aligned;");
    for (int a = 0; a < f->naggr && o < ds; a++) {
        o += (size_t)snprintf(dom + o, ds - o, " rank %d: ost", f->aggr_rank[a]);
        for (int64_t c = a; c < f->stripe_count && o < ds; c += f->naggr) {
            o += (size_t)snprintf(dom + o, ds - o, "%s%llu", c == a ? " " : ",", (unsigned long long)f->osts[c]);
        }
        if (o < ds) {
            o += (size_t)snprintf(dom + o, ds - o, ";");
        }
    }
}

static void debug_file(const struct wm_file *f, const char *what)
{
    if (!wm_debug || f->rank != 0) {
        return;
    }
    char layout[1024], aggr[1024], dom[4096];
    describe(f, layout, sizeof(layout), aggr, sizeof(aggr), dom, sizeof(dom));
    WM_DEBUG("%s %s: %s; aggregators (ranks) %s; placement %s; domains %s exchange %s; throttle %d; "
             "cb_buffer_size %lld; io %s; wait %s; direct %s; collective %s\n",
             what, f->path, layout, aggr, placements[f->placement], dom, exchanges[f->exchange], f->throttle,
             (long long)f->cb_buffer_size, f->fd >= 0 ? "mount" : "libweft", waits[f->wait_sleep],
             directs[f->direct], f->enabled ? "weft" : "mpi");
}

/* ---- MPI_File_open / close ---- */

/* The ranks of this job on this node, as the launcher gives them (MPICH's Hydra and
 * Slurm's srun with PMI: MPI_LOCALNRANKS; OpenMPI: OMPI_COMM_WORLD_LOCAL_SIZE); 0 when it
 * does not. Every process of the job here takes CPU, whatever communicator it opens the
 * file with. */
static int launcher_node_ranks(void)
{
    const char *names[] = {"MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *v = getenv(names[i]);
        if (v && atoi(v) > 0) {
            return atoi(v);
        }
    }
    return 0;
}

/* The ranks of comm that share memory with this one (a blocking collective of comm): the
 * node's ranks when the launcher does not say. */
static int shared_memory_ranks(MPI_Comm comm)
{
    MPI_Comm node;
    int n = 1;
    if (PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_size(node, &n);
        PMPI_Comm_free(&node);
    }
    return n;
}

/* More ranks on this node than it has cores: where the layer's waits poll with sleeps. */
static int oversubscribed(int node_ranks)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 0 && node_ranks > cores;
}

/* How a file's collectives wait: the weft_wait hint, else WEFT_MPIIO_WAIT, else with
 * sleeps when the node is oversubscribed. */
static int wait_choice(MPI_Info info, int oversub)
{
    return hint_word(info, "weft_wait", waits, 2, env_word("WEFT_MPIIO_WAIT", waits, 2, oversub));
}

int MPI_File_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh)
{
    static int inited;
    if (!inited) {
        debug_init();
        inited = 1;
    }
    char abs[PATH_MAX], mgs[2048], inner[PATH_MAX];
    absolute(filename, abs, sizeof(abs));
    const char *off = getenv("WEFT_MPIIO_DISABLE");
    int on_weft = !(off && *off && strcmp(off, "0") != 0) &&
                  find_weft_mount(abs, mgs, sizeof(mgs), inner, sizeof(inner)) == 0;
    /* How this open's own collectives wait. A file off Weft costs the layer this one
     * allreduce, and no split of comm to count the node's ranks. */
    int launcher_ranks = launcher_node_ranks();
    int sleep = wait_choice(info, oversubscribed(launcher_ranks));
    int all_on = 0, rank, nprocs;
    wm_allreduce(sleep, &on_weft, &all_on, 1, MPI_INT, MPI_MIN, comm);
    if (!all_on) {
        return PMPI_File_open(comm, filename, amode, info, fh);
    }
    if (launcher_ranks <= 0) {
        sleep = wait_choice(info, oversubscribed(shared_memory_ranks(comm)));
    }
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &nprocs);
    weft_fs *fs = mount_of(mgs);

    /* A new file with striping hints: rank 0 makes it with that layout. */
    int64_t factor = hint_int(info, "striping_factor", 0), unit = hint_int(info, "striping_unit", 0);
    int64_t start = hint_int(info, "start_iodevice", -1);
    int created = 0;
    if (rank == 0 && fs && (amode & MPI_MODE_CREATE) && (factor > 0 || unit > 0 || start >= 0)) {
        weft_layout *l = weft_layout_alloc();
        if (factor > 0) {
            weft_layout_stripe_count_set(l, factor);
        }
        if (unit > 0) {
            weft_layout_stripe_size_set(l, (uint64_t)unit);
        }
        if (start >= 0) {
            weft_layout_ost_index_set(l, 0, (uint64_t)start);
        }
        weft_file *wf = NULL;
        int rc = weft_layout_file_create(fs, inner, O_RDWR, 0666, l, &wf);
        if (rc == 0) {
            created = 1;
            weft_close(wf);
        } else {
            WM_DEBUG("layout for %s (factor %lld unit %lld start %lld): %s\n", inner, (long long)factor,
                     (long long)unit, (long long)start, weft_strerror());
        }
        weft_layout_free(l);
    }
    wm_bcast(sleep, &created, 1, MPI_INT, 0, comm);
    int rc = PMPI_File_open(comm, filename, created ? amode & ~MPI_MODE_EXCL : amode, info, fh);
    if (rc != MPI_SUCCESS) {
        return rc;
    }

    struct wm_file *f = calloc(1, sizeof(*f));
    f->fh = *fh;
    f->comm = MPI_COMM_NULL;
    f->rank = rank;
    f->nprocs = nprocs;
    f->path = strdup(inner);
    f->writable = !(amode & MPI_MODE_RDONLY);
    f->enabled = 1;
    /* The client's osc max_rpcs_in_flight (set-param -P), as Lustre's ROMIO driver is bound
     * by the OSC's; WEFT_MPIIO_THROTTLE, then the weft_throttle hint, override it. */
    int rif = fs ? weft_max_rpcs_in_flight(fs) : 0;
    f->throttle = rif > 0 ? rif : 8;
    const char *env_throttle = getenv("WEFT_MPIIO_THROTTLE");
    if (env_throttle && atoi(env_throttle) > 0) {
        f->throttle = atoi(env_throttle);
    }
    f->cb_buffer_size = 4 << 20;
    const char *env_cb = getenv("WEFT_MPIIO_CB_BUFFER_SIZE");
    if (env_cb && atoll(env_cb) > 0) {
        f->cb_buffer_size = atoll(env_cb);
    }
    f->rpc_size = 1 << 20;
    const char *env_align = getenv("WEFT_MPIIO_ALIGN");
    f->align = !(env_align && strcmp(env_align, "0") == 0);
    f->placement = env_word("WEFT_MPIIO_PLACEMENT", placements, 2, WM_PLACE_OST);
    f->exchange = env_word("WEFT_MPIIO_EXCHANGE", exchanges, 2, WM_XCHG_STEPWISE);
    f->io_mount = env_word("WEFT_MPIIO_IO", ios, 2, 0);
    f->fd = -1;
    f->wait_sleep = sleep;
    f->direct = env_word("WEFT_MPIIO_DIRECT", directs, 2, 1);
    const char *env_nodes = getenv("WEFT_MPIIO_CB_NODES");
    if (env_nodes && atoi(env_nodes) > 0) {
        f->cb_nodes = atoi(env_nodes);
    }
    take_hints(f, info);
    int ok = 0;
    if (fs) {
        int flags = f->writable ? O_RDWR : O_RDONLY;
        int orc = weft_open(fs, inner, flags, 0, &f->wf);
        if (orc == -EACCES && f->writable) {
            orc = weft_open(fs, inner, O_WRONLY, 0, &f->wf);
        }
        if (orc < 0) {
            WM_DEBUG("weft_open(%s): %s\n", inner, weft_strerror());
            f->wf = NULL;
        } else {
            ok = 1;
        }
        if (ok && f->io_mount) {
            /* weft_io=mount: the aggregators' I/O through the mount (to tell libweft's path
             * from the layer's own costs); libweft for the layout, the size, the close */
            f->fd = open(abs, f->writable ? O_RDWR : O_RDONLY);
            if (f->fd < 0) {
                WM_DEBUG("open(%s) on the mount for weft_io=mount: %s; libweft's I/O instead\n", abs, strerror(errno));
            }
        }
    }
    /* The layout, as rank 0 reads it, and how many ranks could not open the file, in one
     * sum over the ranks: [ranks not ok, count, size, osts...]. */
    int64_t here[3 + 256] = {0}, lay[3 + 256];
    here[0] = !ok;
    if (ok && rank == 0) {
        weft_layout *l = NULL;
        uint32_t comps = 0;
        int64_t count = 0;
        uint64_t size = 0;
        if (weft_layout_get_by_file(f->wf, &l) == 0 && weft_layout_comp_count(l, &comps) == 0 && comps == 1 &&
            weft_layout_stripe_count_get(l, &count) == 0 && weft_layout_stripe_size_get(l, &size) == 0 && count > 0 &&
            count <= 256 && size > 0) {
            here[1] = count;
            here[2] = (int64_t)size;
            for (int64_t i = 0; i < count; i++) {
                uint64_t ost = 0;
                weft_layout_ost_index_get(l, (uint32_t)i, &ost);
                here[3 + i] = (int64_t)ost;
            }
        } else {
            WM_DEBUG("%s: layout not taken (components %u, count %lld): collective I/O left to MPI\n", inner, comps,
                     (long long)count);
        }
        weft_layout_free(l);
    }
    wm_allreduce(sleep, here, lay, 3 + 256, MPI_INT64_T, MPI_SUM, comm);
    if (lay[0] > 0 || lay[1] <= 0) {
        if (f->fd >= 0) {
            close(f->fd);
        }
        if (f->wf) {
            weft_close(f->wf);
        }
        free(f->path);
        free(f);
        return MPI_SUCCESS;
    }
    f->stripe_count = lay[1];
    f->stripe_size = lay[2];
    f->osts = malloc(sizeof(uint64_t) * (size_t)f->stripe_count);
    for (int64_t i = 0; i < f->stripe_count; i++) {
        f->osts[i] = (uint64_t)lay[3 + i];
    }
    wm_comm_dup(sleep, comm, &f->comm);
    wm_choose_aggregators(f);
    /* The default view: bytes from offset 0. */
    f->disp = 0;
    f->etype_size = 1;
    wm_flatten(MPI_BYTE, &f->ft);
    f->view_ok = 1;
    files = realloc(files, sizeof(*files) * (size_t)(nfiles + 1));
    files[nfiles++] = f;
    debug_file(f, "open");
    return MPI_SUCCESS;
}

int MPI_File_close(MPI_File *fh)
{
    struct wm_file *f = lookup(*fh);
    if (f) {
        /* libweft's close tells the MDS the size its objects hold; then the library's. */
        if (f->fd >= 0) {
            close(f->fd);
            f->fd = -1;
        }
        if (f->wf) {
            weft_close(f->wf);
            f->wf = NULL;
        }
        wm_barrier(f->wait_sleep, f->comm);
        forget(f);
    }
    return PMPI_File_close(fh);
}

int MPI_File_sync(MPI_File fh)
{
    struct wm_file *f = lookup(fh);
    if (f && f->wf) {
        if (f->fd >= 0) {
            fsync(f->fd);
        }
        weft_fsync(f->wf);
    }
    return PMPI_File_sync(fh);
}

/* ---- views and hints ---- */

int MPI_File_set_view(MPI_File fh, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype, const char *datarep,
                      MPI_Info info)
{
    int rc = PMPI_File_set_view(fh, disp, etype, filetype, datarep, info);
    struct wm_file *f = lookup(fh);
    if (!f) {
        return rc;
    }
    int placement = f->placement, cb_nodes = f->cb_nodes;
    take_hints(f, info);
    if (f->placement != placement || f->cb_nodes != cb_nodes) {
        wm_choose_aggregators(f);
    }
    wm_flat_free(&f->ft);
    int ok = rc == MPI_SUCCESS && strcmp(datarep, "native") == 0 && disp >= 0;
    int esize = 0;
    MPI_Type_size(etype, &esize);
    ok = ok && esize > 0;
    if (ok && wm_flatten(filetype, &f->ft) != 0) {
        ok = 0;
    }
    /* The filetype's blocks in increasing order, within one extent (MPI requires it of a
     * filetype, and the exchange relies on it). */
    if (ok) {
        const struct wm_flat *ft = &f->ft;
        ok = ft->n > 0 && ft->size > 0 && ft->b[0].disp >= 0;
        for (int64_t i = 1; ok && i < ft->n; i++) {
            ok = ft->b[i].disp >= ft->b[i - 1].disp + ft->b[i - 1].len;
        }
        ok = ok && ft->b[ft->n - 1].disp + ft->b[ft->n - 1].len <= ft->extent + ft->b[0].disp;
    }
    int all_ok = 0;
    wm_allreduce(f->wait_sleep, &ok, &all_ok, 1, MPI_INT, MPI_MIN, f->comm);
    f->view_ok = all_ok;
    f->disp = disp;
    f->etype_size = esize > 0 ? esize : 1;
    if (wm_debug && f->rank == 0) {
        WM_DEBUG("set_view %s: disp %lld, filetype %lld blocks of %lld bytes in an extent of %lld: %s\n", f->path,
                 (long long)disp, (long long)f->ft.n, (long long)f->ft.size, (long long)f->ft.extent,
                 all_ok ? "weft collective I/O" : "left to MPI");
    }
    return rc;
}

int MPI_File_set_info(MPI_File fh, MPI_Info info)
{
    struct wm_file *f = lookup(fh);
    if (f) {
        take_hints(f, info);
        wm_choose_aggregators(f);
        debug_file(f, "set_info");
    }
    return PMPI_File_set_info(fh, info);
}

int MPI_File_get_info(MPI_File fh, MPI_Info *info_used)
{
    int rc = PMPI_File_get_info(fh, info_used);
    struct wm_file *f = lookup(fh);
    if (rc != MPI_SUCCESS || !f) {
        return rc;
    }
    char v[64], layout[1024], aggr[1024], dom[4096];
    describe(f, layout, sizeof(layout), aggr, sizeof(aggr), dom, sizeof(dom));
    snprintf(v, sizeof(v), "%lld", (long long)f->stripe_count);
    MPI_Info_set(*info_used, "striping_factor", v);
    snprintf(v, sizeof(v), "%lld", (long long)f->stripe_size);
    MPI_Info_set(*info_used, "striping_unit", v);
    snprintf(v, sizeof(v), "%llu", (unsigned long long)f->osts[0]);
    MPI_Info_set(*info_used, "start_iodevice", v);
    snprintf(v, sizeof(v), "%d", f->throttle);
    MPI_Info_set(*info_used, "weft_throttle", v);
    snprintf(v, sizeof(v), "%lld", (long long)f->cb_buffer_size);
    MPI_Info_set(*info_used, "cb_buffer_size", v);
    snprintf(v, sizeof(v), "%d", f->naggr);
    MPI_Info_set(*info_used, "cb_nodes", v);
    MPI_Info_set(*info_used, "weft_layout", layout);
    MPI_Info_set(*info_used, "weft_aggregators", aggr);
    MPI_Info_set(*info_used, "weft_domains", dom);
    MPI_Info_set(*info_used, "weft_placement", placements[f->placement]);
    MPI_Info_set(*info_used, "weft_exchange", exchanges[f->exchange]);
    MPI_Info_set(*info_used, "weft_io", f->fd >= 0 ? "mount" : "libweft");
    MPI_Info_set(*info_used, "weft_wait", waits[f->wait_sleep]);
    MPI_Info_set(*info_used, "weft_direct", directs[f->direct]);
    MPI_Info_set(*info_used, "weft_align", f->align ? "enable" : "disable");
    MPI_Info_set(*info_used, "weft_collective", f->enabled && f->view_ok ? "enable" : "disable");
    return rc;
}

/* ---- the collective calls ---- */

static int taken(struct wm_file *f, int write)
{
    return f && f->enabled && f->view_ok && f->wf && (!write || f->writable);
}

static void set_status(MPI_Status *status, MPI_Datatype type, int count)
{
    if (status != MPI_STATUS_IGNORE) {
        /* In bytes: both MPIs keep a status's count in bytes, so MPI_Get_count with the
         * call's type gives `count` and MPI_Get_elements its basic elements. */
        int size = 0;
        MPI_Type_size(type, &size);
        status->MPI_ERROR = MPI_SUCCESS;
        MPI_Status_set_elements(status, MPI_BYTE, count * size);
        MPI_Status_set_cancelled(status, 0);
    }
}

static int at_all(MPI_File fh, MPI_Offset offset, void *buf, int count, MPI_Datatype type, MPI_Status *status,
                  int write)
{
    struct wm_file *f = lookup(fh);
    int rc = wm_collective(f, write, (int64_t)offset * f->etype_size, buf, count, type);
    if (rc == MPI_SUCCESS) {
        set_status(status, type, count);
    }
    return rc;
}

/* The individual file pointer is the library's: read it, move it past what was done. */
static int at_pointer(MPI_File fh, void *buf, int count, MPI_Datatype type, MPI_Status *status, int write)
{
    struct wm_file *f = lookup(fh);
    MPI_Offset p = 0;
    PMPI_File_get_position(fh, &p);
    int rc = at_all(fh, p, buf, count, type, status, write);
    int size;
    MPI_Type_size(type, &size);
    PMPI_File_seek(fh, p + (MPI_Offset)count * size / f->etype_size, MPI_SEEK_SET);
    return rc;
}

int MPI_File_write_at_all(MPI_File fh, MPI_Offset offset, const void *buf, int count, MPI_Datatype type,
                          MPI_Status *status)
{
    if (!taken(lookup(fh), 1)) {
        return PMPI_File_write_at_all(fh, offset, buf, count, type, status);
    }
    return at_all(fh, offset, (void *)buf, count, type, status, 1);
}

int MPI_File_read_at_all(MPI_File fh, MPI_Offset offset, void *buf, int count, MPI_Datatype type, MPI_Status *status)
{
    if (!taken(lookup(fh), 0)) {
        return PMPI_File_read_at_all(fh, offset, buf, count, type, status);
    }
    return at_all(fh, offset, buf, count, type, status, 0);
}

int MPI_File_write_all(MPI_File fh, const void *buf, int count, MPI_Datatype type, MPI_Status *status)
{
    if (!taken(lookup(fh), 1)) {
        return PMPI_File_write_all(fh, buf, count, type, status);
    }
    return at_pointer(fh, (void *)buf, count, type, status, 1);
}

int MPI_File_read_all(MPI_File fh, void *buf, int count, MPI_Datatype type, MPI_Status *status)
{
    if (!taken(lookup(fh), 0)) {
        return PMPI_File_read_all(fh, buf, count, type, status);
    }
    return at_pointer(fh, buf, count, type, status, 0);
}

/* ---- the end ---- */

int MPI_Finalize(void)
{
    while (nfiles > 0) {
        forget(files[nfiles - 1]);
    }
    for (int i = 0; i < nmounts; i++) {
        weft_umount(mounts[i].fs);
        free(mounts[i].mgs);
    }
    free(mounts);
    mounts = NULL;
    nmounts = 0;
    return PMPI_Finalize();
}
