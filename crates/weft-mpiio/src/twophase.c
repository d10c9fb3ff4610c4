/*
 * twophase.c: Weft's collective I/O, the two-phase algorithm made layout-aware as on the K
 * computer's FEFS (Lustre): the file domains are whole stripes, each aggregator owns the
 * stripes of its OSTs (stripe k lives on OST position k mod stripe_count, and that position
 * belongs to aggregator (k mod stripe_count) mod naggr), so an OST is only ever written by
 * one aggregator; the exchange of data between the ranks and the aggregators goes window by
 * window (a window: as many rows of stripes as fill cb_buffer_size at an aggregator) with
 * MPI_Isend/MPI_Irecv; and an aggregator keeps at most `throttle` requests in flight per
 * OST (Lustre's osc max_rpcs_in_flight, FEFS's throt_N; src/aggio.c).
 *
 * To measure each part alone: weft_placement=rank gives ROMIO's generic domains instead
 * (contiguous ranges of the call's extent, edges on stripes, aggregators ranks 0..A-1),
 * weft_align=disable makes those ranges even bytes, weft_exchange=alltoallv does each
 * window's exchange with one MPI_(I)alltoallv of the communicator.
 */
#include "internal.h"
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* A piece of the access: `len` bytes at file offset `off`, at `mem` in the packed buffer
 * (or, at an aggregator, in a receive/send buffer). Never crosses a stripe boundary. */
struct piece {
    int64_t off, len, mem;
};

struct pvec {
    struct piece *p;
    int64_t n, cap;
};

static int pv_push(struct pvec *v, int64_t off, int64_t len, int64_t mem)
{
    if (v->n == v->cap) {
        int64_t cap = v->cap ? v->cap * 2 : 64;
        struct piece *p = realloc(v->p, (size_t)cap * sizeof(*p));
        if (!p) {
            return -1;
        }
        v->p = p;
        v->cap = cap;
    }
    v->p[v->n].off = off;
    v->p[v->n].len = len;
    v->p[v->n].mem = mem;
    v->n++;
    return 0;
}

/* Adds file range [off, off+len) at `mem`, cut at stripe boundaries. */
static int add_range(struct pvec *v, int64_t S, int64_t off, int64_t len, int64_t mem)
{
    while (len > 0) {
        int64_t room = S - off % S;
        int64_t take = len < room ? len : room;
        if (pv_push(v, off, take, mem) != 0) {
            return -1;
        }
        off += take;
        mem += take;
        len -= take;
    }
    return 0;
}

/* The file pieces of bytes [pos, pos+nbytes) of the view's data stream. */
static int map_view(const struct wm_file *f, int64_t pos, int64_t nbytes, struct pvec *out)
{
    const struct wm_flat *ft = &f->ft;
    int64_t S = f->stripe_size;
    if (nbytes == 0) {
        return 0;
    }
    if (ft->n == 1 && ft->b[0].disp == 0 && ft->b[0].len == ft->extent) {
        return add_range(out, S, f->disp + pos, nbytes, 0);
    }
    int64_t tile = pos / ft->size, within = pos % ft->size, cum = 0, i = 0;
    while (cum + ft->b[i].len <= within) {
        cum += ft->b[i].len;
        i++;
    }
    int64_t mem = 0, skip = within - cum;
    while (mem < nbytes) {
        const struct wm_block *b = &ft->b[i];
        int64_t take = b->len - skip;
        if (take > nbytes - mem) {
            take = nbytes - mem;
        }
        if (add_range(out, S, f->disp + tile * ft->extent + b->disp + skip, take, mem) != 0) {
            return -1;
        }
        mem += take;
        skip = 0;
        if (++i == ft->n) {
            i = 0;
            tile++;
        }
    }
    return 0;
}

/* Index of the aggregator that owns the stripe holding `off` (the K computer's placement). */
static int owner(const struct wm_file *f, int64_t off)
{
    return (int)((off / f->stripe_size) % f->stripe_count % f->naggr);
}

/* With contiguous domains ([dlo[a], dlo[a+1]) is aggregator a's, some maybe empty): the
 * aggregator whose domain holds `off`, the last a with dlo[a] <= off. */
static int owner_contig(const int64_t *dlo, int A, int64_t off)
{
    int lo = 0, hi = A - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (dlo[mid] <= off) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    return lo;
}

void wm_free_buffers(struct wm_file *f)
{
    free(f->sbuf);
    f->sbuf = NULL;
    f->sbuf_cap = 0;
    for (int k = 0; k < 2; k++) {
        free(f->xbuf[k]);
        free(f->ebuf[k]);
        f->xbuf[k] = f->ebuf[k] = NULL;
        f->xbuf_cap[k] = f->ebuf_cap[k] = 0;
    }
}

void wm_choose_aggregators(struct wm_file *f)
{
    wm_free_buffers(f);
    int n = (int)f->stripe_count;
    if (n > f->nprocs) {
        n = f->nprocs;
    }
    if (f->cb_nodes > 0 && f->cb_nodes < n) {
        n = f->cb_nodes;
    }
    if (n < 1) {
        n = 1;
    }
    f->naggr = n;
    free(f->aggr_rank);
    f->aggr_rank = malloc(sizeof(int) * (size_t)n);
    for (int a = 0; a < n; a++) {
        /* K computer: spread over the ranks (over the nodes when ranks are placed by node);
         * ROMIO's generic placement: the first ranks, in rank order */
        f->aggr_rank[a] = f->placement == WM_PLACE_OST ? (int)((int64_t)a * f->nprocs / n) : a;
    }
}

/* ---- the collective call ---- */

/* A window's write at an aggregator, run in a thread while the next window is exchanged;
 * or its read, while the window before is sent. */
struct iojob {
    const struct wm_file *f;
    int write;
    struct wm_apiece *ap;
    int64_t n;
    char **ebuf;
    size_t *ebuf_cap;
    int64_t size0;
    int err;
    int running;
    pthread_t th;
    struct wm_iostat st;
};

static void *io_job(void *arg)
{
    struct iojob *j = arg;
    j->err = wm_window_io(j->f, j->write, j->ap, j->n, j->ebuf, j->ebuf_cap, j->size0, &j->st);
    return NULL;
}

/* Waits for the job's I/O, adds its statistics to `st`; its error, or 0. */
static int io_join(struct iojob *j, struct wm_iostat *st)
{
    if (!j->running) {
        return 0;
    }
    pthread_join(j->th, NULL);
    j->running = 0;
    wm_iostat_add(st, &j->st);
    memset(&j->st, 0, sizeof(j->st));
    return j->err;
}

/* At an aggregator: per source rank, its (offset, length) list, the cursor in it and its
 * end; per buffer set, the pieces of a window and the bytes each rank has in it. */
struct aggwin {
    int P;
    const int64_t *rlist;
    int64_t *rcur, *rend;
    struct wm_apiece *ap[2];
    int64_t cap[2], n[2];
    int64_t *rbytes[2];
};

/* The pieces of the window that ends at `whi` into set `set` (f->xbuf[set] holds their
 * bytes, rank after rank), the cursors moved past them. */
static void agg_window(struct wm_file *f, struct aggwin *w, int64_t whi, int set)
{
    int64_t total = 0, n = 0;
    for (int r = 0; r < w->P; r++) {
        int64_t b = 0;
        for (int64_t i = w->rcur[r]; i < w->rend[r] && w->rlist[2 * i] < whi; i++) {
            b += w->rlist[2 * i + 1];
            n++;
        }
        w->rbytes[set][r] = b;
        total += b;
    }
    if (n > w->cap[set]) {
        free(w->ap[set]);
        w->ap[set] = malloc(sizeof(struct wm_apiece) * (size_t)n);
        w->cap[set] = n;
    }
    wm_grow(&f->xbuf[set], &f->xbuf_cap[set], (size_t)(total ? total : 1));
    struct wm_apiece *ap = w->ap[set];
    int64_t x = 0, k = 0;
    for (int r = 0; r < w->P; r++) {
        for (; w->rcur[r] < w->rend[r] && w->rlist[2 * w->rcur[r]] < whi; w->rcur[r]++) {
            ap[k].off = w->rlist[2 * w->rcur[r]];
            ap[k].len = w->rlist[2 * w->rcur[r] + 1];
            ap[k].data = f->xbuf[set] + x;
            x += ap[k].len;
            k++;
        }
    }
    w->n[set] = n;
}

/* Starts the I/O of set `set`'s window in a thread (in this one when none can start). */
static void io_start(struct wm_file *f, struct iojob *j, int write, struct aggwin *w, int set, int64_t size0,
                     struct wm_iostat *st, int *err)
{
    if (w->n[set] == 0) {
        return;
    }
    j->f = f;
    j->write = write;
    j->ap = w->ap[set];
    j->n = w->n[set];
    j->ebuf = &f->ebuf[set];
    j->ebuf_cap = &f->ebuf_cap[set];
    j->size0 = size0;
    j->err = 0;
    if (pthread_create(&j->th, NULL, io_job, j) == 0) {
        j->running = 1;
        return;
    }
    io_job(j);
    wm_iostat_add(st, &j->st);
    memset(&j->st, 0, sizeof(j->st));
    if (j->err && !*err) {
        *err = j->err;
    }
}

/* MPI_Waitall, or (sleep: more ranks on the node than cores) a poll with short sleeps:
 * there a rank spinning in the MPI library takes the CPU from the aggregators' I/O threads,
 * the servers and the very ranks it waits for (docs/BENCHMARKS.md, MPI-IO). */
void wm_wait(int sleep, int n, MPI_Request *req, MPI_Status *st)
{
    if (!sleep) {
        MPI_Waitall(n, req, st);
        return;
    }
    for (;;) {
        int done = 0;
        MPI_Testall(n, req, &done, st);
        if (done) {
            return;
        }
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
}

void wm_wait_all(const struct wm_file *f, int n, MPI_Request *req, MPI_Status *st)
{
    wm_wait(f->wait_sleep, n, req, st);
}

void wm_allreduce(int sleep, const void *in, void *out, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm)
{
    MPI_Request r;
    PMPI_Iallreduce(in, out, n, t, op, comm, &r);
    wm_wait(sleep, 1, &r, MPI_STATUSES_IGNORE);
}

void wm_bcast(int sleep, void *buf, int n, MPI_Datatype t, int root, MPI_Comm comm)
{
    MPI_Request r;
    PMPI_Ibcast(buf, n, t, root, comm, &r);
    wm_wait(sleep, 1, &r, MPI_STATUSES_IGNORE);
}

void wm_alltoall(int sleep, const void *in, void *out, int n, MPI_Datatype t, MPI_Comm comm)
{
    MPI_Request r;
    PMPI_Ialltoall(in, n, t, out, n, t, comm, &r);
    wm_wait(sleep, 1, &r, MPI_STATUSES_IGNORE);
}

void wm_allgather(int sleep, const void *in, void *out, int n, MPI_Datatype t, MPI_Comm comm)
{
    MPI_Request r;
    PMPI_Iallgather(in, n, t, out, n, t, comm, &r);
    wm_wait(sleep, 1, &r, MPI_STATUSES_IGNORE);
}

void wm_alltoallv(int sleep, const void *sb, const int *sc, const int *sd, void *rb, const int *rc, const int *rd,
                  MPI_Datatype t, MPI_Comm comm)
{
    MPI_Request r;
    PMPI_Ialltoallv(sb, sc, sd, t, rb, rc, rd, t, comm, &r);
    wm_wait(sleep, 1, &r, MPI_STATUSES_IGNORE);
}

void wm_barrier(int sleep, MPI_Comm comm)
{
    MPI_Request r;
    PMPI_Ibarrier(comm, &r);
    wm_wait(sleep, 1, &r, MPI_STATUSES_IGNORE);
}

void wm_comm_dup(int sleep, MPI_Comm comm, MPI_Comm *out)
{
    MPI_Request r;
    PMPI_Comm_idup(comm, out, &r);
    wm_wait(sleep, 1, &r, MPI_STATUSES_IGNORE);
}

/* Where a collective call's time went at this rank (WEFT_MPIIO_DEBUG). */
enum { T_PLAN, T_PACK, T_XCHG, T_IOWAIT, T_NT };

/* The end of a window's exchange: with weft_exchange=alltoallv one MPI_Ialltoallv of
 * (sb, sc, sd) into (rb, rc, rd) waited for; stepwise, the `nreq` sends and receives already
 * posted in `req`. */
static void finish_exchange(const struct wm_file *f, int a2a, const void *sb, const int *sc, const int *sd, void *rb,
                            const int *rc, const int *rd, MPI_Request *req, int nreq, MPI_Status *st)
{
    if (a2a) {
        wm_alltoallv(f->wait_sleep, sb, sc, sd, rb, rc, rd, MPI_BYTE, f->comm);
    } else {
        wm_wait_all(f, nreq, req, st);
    }
}

static void print_split(const struct wm_file *f, int write, double total, const double *t, const struct wm_iostat *io)
{
    int w = write ? 1 : 0;
    WM_DEBUG("rank %d %s split: total %.3f s: plan %.3f, pack/unpack %.3f, exchange %.3f, waiting for I/O %.3f; "
             "I/O: %lld %s of %.0f KiB avg in %.3f s summed (%.2f ms avg, %.2f max; wall %.3f), %lld "
             "reads-before-write of %.0f KiB avg in %.3f s, extent copies %.3f s\n",
             f->rank, write ? "write" : "read", total, t[T_PLAN], t[T_PACK], t[T_XCHG], t[T_IOWAIT],
             (long long)io->calls[w], f->fd >= 0 ? (write ? "pwrite (mount)" : "pread (mount)") : write ? "weft_pwrite" : "weft_pread",
             io->calls[w] ? (double)io->bytes[w] / (double)io->calls[w] / 1024 : 0.0, io->call_s[w],
             io->calls[w] ? 1e3 * io->call_s[w] / (double)io->calls[w] : 0.0, 1e3 * io->call_max[w], io->wall[w],
             (long long)(write ? io->calls[0] : 0), write && io->calls[0] ? (double)io->bytes[0] / (double)io->calls[0] / 1024 : 0.0,
             write ? io->call_s[0] : 0.0, io->copy_s);
}

/* The end of a collective call, either way: a read's data unpacked into the program's
 * buffer, every rank told whether any failed, the counts the debug lines give. The error
 * any rank had (0: none). */
static int finish_call(struct wm_file *f, int write, char *mem, void *ubuf, int count, MPI_Datatype type, int contig,
                       int64_t nbytes, int err, int64_t nsteps, double *tm)
{
    if (!contig && !write && nbytes > 0) {
        double tx = MPI_Wtime();
        int position = 0;
        MPI_Unpack(mem, (int)nbytes, &position, ubuf, count, type, MPI_COMM_SELF);
        tm[T_PACK] += MPI_Wtime() - tx;
    }
    int gerr = 0;
    wm_allreduce(f->wait_sleep, &err, &gerr, 1, MPI_INT, MPI_MAX, f->comm);
    f->last_steps = nsteps;
    f->last_bytes = nbytes;
    return gerr;
}

/* MPI_SUCCESS, or MPI_ERR_IO with errno set to the error a rank had. */
static int call_result(int gerr)
{
    if (gerr) {
        errno = gerr;
        return MPI_ERR_IO;
    }
    return MPI_SUCCESS;
}

/* Whether every rank had better do its own I/O than exchange (weft_direct=automatic, as
 * ROMIO's romio_cb_write=automatic): no two ranks' ranges [lo, hi) of the file overlap, so
 * no aggregator would gather anything from two ranks, and the pieces average at least half
 * a stripe (or half a request), so that writing them where they are costs no more
 * requests than whole stripes would (small pieces gain from the exchange's merging even
 * when they do not interleave). `all4` holds each rank's (lo, hi, pieces, bytes). Every
 * rank decides the same from the same numbers. */
static int direct_suits(const struct wm_file *f, const int64_t *all4)
{
    if (!f->direct) {
        return 0;
    }
    int P = f->nprocs;
    int64_t pieces = 0, bytes = 0;
    for (int r = 0; r < P; r++) {
        pieces += all4[4 * r + 2];
        bytes += all4[4 * r + 3];
        if (all4[4 * r + 2] == 0) {
            continue;
        }
        for (int q = r + 1; q < P; q++) {
            if (all4[4 * q + 2] > 0 && all4[4 * q] < all4[4 * r + 1] && all4[4 * r] < all4[4 * q + 1]) {
                return 0;
            }
        }
    }
    int64_t unit = f->stripe_size < f->rpc_size ? f->stripe_size : f->rpc_size;
    return pieces > 0 && bytes / pieces >= unit / 2;
}

/* The collective call as each rank's own I/O (direct_suits): its pieces written from, or
 * read into, its buffer where they are; then, as the two phases end, every rank learns
 * whether any failed. Takes `v` and (not contig) `mem`. */
static int direct_collective(struct wm_file *f, int write, struct pvec *v, char *mem, void *ubuf, int count,
                             MPI_Datatype type, int contig, int err, double t0, int64_t lo, int64_t hi)
{
    double tm[T_NT] = {0};
    struct wm_iostat io = {0};
    int64_t nbytes = 0;
    struct wm_apiece *p = malloc(sizeof(*p) * (size_t)(v->n + 1));
    for (int64_t i = 0; i < v->n; i++) {
        p[i].off = v->p[i].off;
        p[i].len = v->p[i].len;
        p[i].data = mem + v->p[i].mem;
        nbytes += v->p[i].len;
    }
    tm[T_PLAN] = MPI_Wtime() - t0;
    double tx = MPI_Wtime();
    if (!err) {
        err = wm_direct_io(f, write, p, v->n, &io);
    }
    tm[T_IOWAIT] = MPI_Wtime() - tx;
    free(p);
    int gerr = finish_call(f, write, mem, ubuf, count, type, contig, nbytes, err, 0, tm);
    if (wm_debug && f->rank == 0) {
        WM_DEBUG("%s: %lld bytes here, file [%lld, %lld), direct: no two ranks' ranges interleave, each rank its own "
                 "I/O, throttle %d, %.3f s\n",
                 write ? "write_all" : "read_all", (long long)nbytes, (long long)(lo == INT64_MAX ? 0 : lo),
                 (long long)(lo == INT64_MAX ? 0 : hi), f->throttle, MPI_Wtime() - t0);
    }
    if (wm_debug > 1) {
        print_split(f, write, MPI_Wtime() - t0, tm, &io);
    }
    free(v->p);
    if (!contig) {
        free(mem);
    }
    return call_result(gerr);
}

int wm_collective(struct wm_file *f, int write, int64_t pos, void *ubuf, int count, MPI_Datatype type)
{
    double t0 = MPI_Wtime(), tm[T_NT] = {0}, tx;
    struct wm_iostat io = {0};
    int tsize;
    MPI_Type_size(type, &tsize);
    int64_t nbytes = (int64_t)count * tsize;
    MPI_Aint lb, ext, tlb, text;
    MPI_Type_get_extent(type, &lb, &ext);
    MPI_Type_get_true_extent(type, &tlb, &text);
    int contig = (int64_t)text == tsize && (count <= 1 || ext == text);
    char *mem = contig ? (char *)ubuf + tlb : malloc((size_t)(nbytes ? nbytes : 1));
    if (!contig && write && nbytes > 0) {
        int position = 0;
        MPI_Pack(ubuf, count, type, mem, (int)nbytes, &position, MPI_COMM_SELF);
    }

    int P = f->nprocs, A = f->naggr, me = f->rank, err = 0;
    struct pvec v = {0};
    if (map_view(f, pos, nbytes, &v) != 0) {
        err = ENOMEM;
    }
    /* Every rank's range, pieces and bytes: the range the call covers, and whether each
     * rank can do its own I/O. */
    int64_t mine4[4] = {v.n ? v.p[0].off : INT64_MAX, v.n ? v.p[v.n - 1].off + v.p[v.n - 1].len : INT64_MIN, v.n,
                        nbytes};
    int64_t *all4 = malloc(sizeof(int64_t) * 4 * (size_t)P);
    wm_allgather(f->wait_sleep, mine4, all4, 4, MPI_INT64_T, f->comm);
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (int r = 0; r < P; r++) {
        lo = all4[4 * r] < lo ? all4[4 * r] : lo;
        hi = all4[4 * r + 1] > hi ? all4[4 * r + 1] : hi;
    }
    if (direct_suits(f, all4)) {
        free(all4);
        return direct_collective(f, write, &v, mem, ubuf, count, type, contig, err, t0, lo, hi);
    }
    free(all4);
    int64_t S = f->stripe_size, C = f->stripe_count, cbw = f->cb_buffer_size;
    /* The K computer's domains (the default): aggregator a owns the stripes of its OSTs.
     * Else contiguous domains, ROMIO's generic ones (weft_placement=rank): A ranges of
     * [lo, hi), their boundaries on stripe boundaries unless weft_align=disable (even byte
     * ranges); each walked in windows of cb_buffer_size from wbase[a]. The pieces are cut
     * at those boundaries too. */
    int cyclic = f->align && f->placement == WM_PLACE_OST;
    int64_t *dlo = calloc((size_t)A + 1, sizeof(int64_t)), *wbase = calloc((size_t)A, sizeof(int64_t));
    if (!cyclic && lo != INT64_MAX) {
        int64_t base = lo, D;
        if (f->align) {
            cbw = cbw >= S ? cbw / S * S : cbw;
            base = lo / S * S;
            D = ((hi - base + A - 1) / A + S - 1) / S * S;
        } else {
            D = (hi - lo + A - 1) / A;
        }
        for (int a = 0; a < A; a++) {
            dlo[a] = a == 0 ? lo : (base + a * D < hi ? base + a * D : hi);
            wbase[a] = a == 0 ? base : dlo[a];
        }
        dlo[A] = hi;
        struct pvec w = {0};
        for (int64_t i = 0; i < v.n && !err; i++) {
            int64_t off = v.p[i].off, len = v.p[i].len, m = v.p[i].mem;
            while (len > 0) {
                int a = owner_contig(dlo, A, off);
                int64_t nb = wbase[a] + ((off - wbase[a]) / cbw + 1) * cbw;
                if (nb > dlo[a + 1]) {
                    nb = dlo[a + 1];
                }
                int64_t take = nb - off < len ? nb - off : len;
                if (pv_push(&w, off, take, m) != 0) {
                    err = ENOMEM;
                    break;
                }
                off += take;
                m += take;
                len -= take;
            }
        }
        free(v.p);
        v = w;
    }
#define OWN(off) (cyclic ? owner(f, (off)) : owner_contig(dlo, A, (off)))
    /* Pieces bucketed by aggregator, each bucket in file order. */
    int *cnt_to = calloc((size_t)P, sizeof(int)), *cnt_from = calloc((size_t)P, sizeof(int));
    int64_t *bstart = calloc((size_t)A + 1, sizeof(int64_t));
    for (int64_t i = 0; i < v.n; i++) {
        bstart[OWN(v.p[i].off) + 1]++;
    }
    for (int a = 0; a < A; a++) {
        cnt_to[f->aggr_rank[a]] = (int)bstart[a + 1];
        bstart[a + 1] += bstart[a];
    }
    struct piece *mine = malloc(sizeof(struct piece) * (size_t)(v.n + 1));
    {
        int64_t *fill = malloc(sizeof(int64_t) * (size_t)A);
        memcpy(fill, bstart, sizeof(int64_t) * (size_t)A);
        for (int64_t i = 0; i < v.n; i++) {
            mine[fill[OWN(v.p[i].off)]++] = v.p[i];
        }
        free(fill);
    }
    /* Who sends the aggregators what: counts, then (offset, length) lists. */
    wm_alltoall(f->wait_sleep, cnt_to, cnt_from, 1, MPI_INT, f->comm);
    int my_a = -1;
    for (int a = 0; a < A; a++) {
        if (f->aggr_rank[a] == me) {
            my_a = a;
        }
    }
    int *sc = calloc((size_t)P, sizeof(int)), *sd = calloc((size_t)P, sizeof(int));
    int *rc = calloc((size_t)P, sizeof(int)), *rd = calloc((size_t)P, sizeof(int));
    int64_t *slist = malloc(sizeof(int64_t) * 2 * (size_t)(v.n + 1));
    for (int64_t i = 0; i < v.n; i++) {
        slist[2 * i] = mine[i].off;
        slist[2 * i + 1] = mine[i].len;
    }
    for (int a = 0; a < A; a++) {
        sc[f->aggr_rank[a]] = 2 * cnt_to[f->aggr_rank[a]];
        sd[f->aggr_rank[a]] = (int)(2 * bstart[a]);
    }
    int64_t rtotal = 0;
    for (int r = 0; r < P; r++) {
        rc[r] = 2 * cnt_from[r];
        rd[r] = (int)(2 * rtotal);
        rtotal += cnt_from[r];
    }
    int64_t *rlist = malloc(sizeof(int64_t) * 2 * (size_t)(rtotal + 1));
    wm_alltoallv(f->wait_sleep, slist, sc, sd, rlist, rc, rd, MPI_INT64_T, f->comm);

    /* The windows. K computer: rows of stripes, as many as fill cb_buffer_size at an
     * aggregator; contiguous domains: cb_buffer_size of each. */
    int64_t win, w0 = 0, nsteps = 0;
    if (cyclic) {
        int64_t owned_max = (C + A - 1) / A;
        int64_t rows = f->cb_buffer_size / (S * owned_max);
        if (rows < 1) {
            rows = 1;
        }
        win = rows * S * C;
        w0 = lo == INT64_MAX ? 0 : lo / win * win;
        nsteps = lo == INT64_MAX ? 0 : (hi - w0 + win - 1) / win;
    } else {
        win = cbw;
        for (int a = 0; a < A && lo != INT64_MAX; a++) {
            int64_t n = dlo[a + 1] > dlo[a] ? (dlo[a + 1] - wbase[a] + cbw - 1) / cbw : 0;
            nsteps = n > nsteps ? n : nsteps;
        }
    }
/* The end of window tt for aggregator a. */
#define WHI(a, tt) (cyclic ? w0 + ((tt) + 1) * win : wbase[a] + ((tt) + 1) * cbw)

    /* Cursors: mine per aggregator, and at an aggregator per source rank. */
    int64_t *scur = malloc(sizeof(int64_t) * (size_t)A);
    memcpy(scur, bstart, sizeof(int64_t) * (size_t)A);
    struct aggwin aw = {0};
    aw.P = P;
    aw.rlist = rlist;
    aw.rcur = malloc(sizeof(int64_t) * (size_t)P);
    aw.rend = malloc(sizeof(int64_t) * (size_t)P);
    aw.rbytes[0] = calloc((size_t)P, sizeof(int64_t));
    aw.rbytes[1] = calloc((size_t)P, sizeof(int64_t));
    for (int r = 0; r < P; r++) {
        aw.rcur[r] = rd[r] / 2;
        aw.rend[r] = aw.rcur[r] + cnt_from[r];
    }
    MPI_Request *req = malloc(sizeof(MPI_Request) * (size_t)(A + P));
    MPI_Status *st = malloc(sizeof(MPI_Status) * (size_t)(A + P));
    int64_t *sbytes = calloc((size_t)A, sizeof(int64_t));
    int64_t *send_first = malloc(sizeof(int64_t) * (size_t)A), *soff = malloc(sizeof(int64_t) * (size_t)A);
    /* counts and displacements of weft_exchange=alltoallv: to ranks, from ranks */
    int *xsc = calloc((size_t)P, sizeof(int)), *xsd = calloc((size_t)P, sizeof(int));
    int *xrc = calloc((size_t)P, sizeof(int)), *xrd = calloc((size_t)P, sizeof(int));
    int a2a = f->exchange == WM_XCHG_ALLTOALLV;
    /* Two sets of buffers: on a write the I/O of window t runs while window t+1 is
     * exchanged into the other set; on a read window t+1 is read while window t is sent. */
    struct iojob job[2];
    memset(job, 0, sizeof(job));

    /* The file's size as the call begins (the aggregators ask the servers): no extent past
     * it needs reading before it is written. */
    int64_t size_here = -1, size0 = INT64_MAX;
    if (write && my_a >= 0) {
        struct stat sb;
        size_here = weft_fstat(f->wf, &sb) == 0 ? sb.st_size : INT64_MAX;
    }
    if (write) {
        wm_allreduce(f->wait_sleep, &size_here, &size0, 1, MPI_INT64_T, MPI_MAX, f->comm);
    }
    tm[T_PLAN] = MPI_Wtime() - t0;
    if (!write && my_a >= 0 && nsteps > 0) {
        /* the first window's read */
        agg_window(f, &aw, WHI(my_a, 0), 0);
        io_start(f, &job[0], 0, &aw, 0, 0, &io, &err);
    }
    for (int64_t t = 0; t < nsteps; t++) {
        int tag = (int)(t % 30000);
        int nreq = 0;
        int set = (int)(t & 1);
        if (my_a >= 0) {
            /* a write: this set's last write (window t-2) is done before its buffers are
             * reused; a read: window t's read is done, and window t+1's starts */
            tx = MPI_Wtime();
            int e = io_join(&job[set], &io);
            tm[T_IOWAIT] += MPI_Wtime() - tx;
            if (e && !err) {
                err = e;
            }
            if (write) {
                agg_window(f, &aw, WHI(my_a, t), set);
            } else if (t + 1 < nsteps) {
                agg_window(f, &aw, WHI(my_a, t + 1), 1 - set);
                io_start(f, &job[1 - set], 0, &aw, 1 - set, 0, &io, &err);
            }
        }
        char *xbuf = my_a >= 0 ? f->xbuf[set] : NULL;
        const int64_t *rbytes = aw.rbytes[set];
        /* This rank's pieces in the window, per aggregator, and where they go in sbuf. */
        int64_t stot = 0;
        for (int a = 0; a < A; a++) {
            int64_t i = scur[a], b = 0;
            send_first[a] = i;
            while (i < bstart[a + 1] && mine[i].off < WHI(a, t)) {
                b += mine[i].len;
                i++;
            }
            sbytes[a] = b;
            soff[a] = stot;
            stot += b;
        }
        wm_grow(&f->sbuf, &f->sbuf_cap, (size_t)(stot ? stot : 1));
        char *sbuf = f->sbuf;
        if (a2a) {
            for (int r = 0; r < P; r++) {
                xsc[r] = xsd[r] = 0;
            }
            for (int a = 0; a < A; a++) {
                xsc[f->aggr_rank[a]] = (int)sbytes[a];
                xsd[f->aggr_rank[a]] = (int)soff[a];
            }
            int64_t x = 0;
            for (int r = 0; r < P; r++) {
                xrc[r] = my_a >= 0 ? (int)rbytes[r] : 0;
                xrd[r] = (int)x;
                x += xrc[r];
            }
            /* a rank that is no aggregator receives nothing, but not into its send buffer:
             * OpenMPI's Ialltoallv takes two buffers at one address as MPI_IN_PLACE (it hung) */
            static char none;
            xbuf = xbuf ? xbuf : &none;
        }
        if (write) {
            if (!a2a && my_a >= 0) {
                int64_t x = 0;
                for (int r = 0; r < P; r++) {
                    if (rbytes[r] > 0) {
                        MPI_Irecv(xbuf + x, (int)rbytes[r], MPI_BYTE, r, tag, f->comm, &req[nreq++]);
                    }
                    x += rbytes[r];
                }
            }
            for (int a = 0; a < A; a++) {
                if (sbytes[a] == 0) {
                    continue;
                }
                tx = MPI_Wtime();
                int64_t x = soff[a];
                for (int64_t i = send_first[a]; x < soff[a] + sbytes[a]; i++) {
                    memcpy(sbuf + x, mem + mine[i].mem, (size_t)mine[i].len);
                    x += mine[i].len;
                }
                tm[T_PACK] += MPI_Wtime() - tx;
                if (!a2a) {
                    MPI_Isend(sbuf + soff[a], (int)sbytes[a], MPI_BYTE, f->aggr_rank[a], tag, f->comm, &req[nreq++]);
                }
            }
            tx = MPI_Wtime();
            finish_exchange(f, a2a, sbuf, xsc, xsd, xbuf, xrc, xrd, req, nreq, st);
            tm[T_XCHG] += MPI_Wtime() - tx;
            if (my_a >= 0) {
                io_start(f, &job[set], 1, &aw, set, size0, &io, &err);
            }
        } else {
            for (int a = 0; a < A && !a2a; a++) {
                if (sbytes[a] > 0) {
                    MPI_Irecv(sbuf + soff[a], (int)sbytes[a], MPI_BYTE, f->aggr_rank[a], tag, f->comm, &req[nreq++]);
                }
            }
            int64_t x = 0;
            for (int r = 0; r < P && !a2a && my_a >= 0; r++) {
                if (rbytes[r] > 0) {
                    MPI_Isend(xbuf + x, (int)rbytes[r], MPI_BYTE, r, tag, f->comm, &req[nreq++]);
                }
                x += rbytes[r];
            }
            tx = MPI_Wtime();
            finish_exchange(f, a2a, xbuf, xrc, xrd, sbuf, xsc, xsd, req, nreq, st);
            tm[T_XCHG] += MPI_Wtime() - tx;
            tx = MPI_Wtime();
            for (int a = 0; a < A; a++) {
                x = soff[a];
                for (int64_t i = send_first[a]; x < soff[a] + sbytes[a]; i++) {
                    memcpy(mem + mine[i].mem, sbuf + x, (size_t)mine[i].len);
                    x += mine[i].len;
                }
            }
            tm[T_PACK] += MPI_Wtime() - tx;
        }
        for (int a = 0; a < A; a++) {
            while (scur[a] < bstart[a + 1] && mine[scur[a]].off < WHI(a, t)) {
                scur[a]++;
            }
        }
    }
    for (int k = 0; k < 2; k++) {
        tx = MPI_Wtime();
        int e = io_join(&job[k], &io);
        tm[T_IOWAIT] += MPI_Wtime() - tx;
        if (e && !err) {
            err = e;
        }
    }
#undef WHI
#undef OWN
    int gerr = finish_call(f, write, mem, ubuf, count, type, contig, nbytes, err, nsteps, tm);
    if (wm_debug && f->rank == 0) {
        WM_DEBUG("%s: %lld bytes here, file [%lld, %lld), %d aggregators (%s placement, %s domains), window %lld "
                 "bytes, %lld steps, %s exchange, throttle %d, %.3f s\n",
                 write ? "write_all" : "read_all", (long long)nbytes, (long long)(lo == INT64_MAX ? 0 : lo),
                 (long long)(lo == INT64_MAX ? 0 : hi), A, f->placement == WM_PLACE_OST ? "ost" : "rank",
                 cyclic ? "ost-cyclic" : f->align ? "contiguous stripe-aligned" : "contiguous even-byte",
                 (long long)win, (long long)nsteps, a2a ? "alltoallv" : "stepwise", f->throttle, MPI_Wtime() - t0);
    }
    if (wm_debug > 1) {
        print_split(f, write, MPI_Wtime() - t0, tm, &io);
    }
    free(aw.ap[0]);
    free(aw.ap[1]);
    free(aw.rbytes[0]);
    free(aw.rbytes[1]);
    free(aw.rcur);
    free(aw.rend);
    free(req);
    free(st);
    free(sbytes);
    free(send_first);
    free(soff);
    free(xsc);
    free(xsd);
    free(xrc);
    free(xrd);
    free(dlo);
    free(wbase);
    free(scur);
    free(rlist);
    free(slist);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    free(mine);
    free(bstart);
    free(cnt_to);
    free(cnt_from);
    free(v.p);
    if (!contig) {
        free(mem);
    }
    return call_result(gerr);
}
