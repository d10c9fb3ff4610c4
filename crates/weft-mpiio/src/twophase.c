/*
 * twophase.c: Weft's collective I/O, the two-phase algorithm made layout-aware as on the K
 * computer's FEFS (Lustre): the file domains are whole stripes, each aggregator owns the
 * stripes of its OSTs (stripe k lives on OST position k mod stripe_count, and that position
 * belongs to aggregator (k mod stripe_count) mod naggr), so an OST is only ever written by
 * one aggregator; the exchange of data between the ranks and the aggregators goes window by
 * window (a window: as many rows of stripes as fill cb_buffer_size at an aggregator) with
 * MPI_Isend/MPI_Irecv; and an aggregator keeps at most `throttle` requests in flight per
 * OST (Lustre's osc max_rpcs_in_flight, FEFS's throt_N).
 */
#include "internal.h"
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A piece of the access: `len` bytes at file offset `off`, at `mem` in the packed buffer
 * (or, at an aggregator, in a receive/send buffer). Never crosses a stripe boundary. */
struct piece {
    int64_t off, len, mem;
};

struct pvec {
    struct piece *p;
    int64_t n, cap;
};

/* A buffer kept from call to call, made at least `need` bytes (its old contents are not kept). */
static void grow(char **buf, size_t *cap, size_t need)
{
    if (need > *cap) {
        free(*buf);
        *buf = malloc(need);
        *cap = need;
    }
}

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

/* Index of the aggregator that owns the stripe holding `off`. */
static int owner(const struct wm_file *f, int64_t off)
{
    return (int)((off / f->stripe_size) % f->stripe_count % f->naggr);
}

void wm_free_buffers(struct wm_file *f)
{
    for (int a = 0; f->sbuf && a < f->naggr; a++) {
        free(f->sbuf[a]);
    }
    free(f->sbuf);
    free(f->sbuf_cap);
    free(f->xbuf);
    free(f->ebuf);
    f->sbuf = NULL;
    f->sbuf_cap = NULL;
    f->xbuf = f->ebuf = NULL;
    f->xbuf_cap = f->ebuf_cap = 0;
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
    /* Spread over the ranks (over the nodes when ranks are placed by node). */
    for (int a = 0; a < n; a++) {
        f->aggr_rank[a] = (int)((int64_t)a * f->nprocs / n);
    }
}

/* ---- throttled I/O at an aggregator ---- */

struct ioreq {
    int64_t off, len;
    char *buf;
    int64_t ost; /* stripe position: requests of one position share a queue */
};

struct ioqueue {
    struct ioreq *r;
    int64_t n;
    int64_t next; /* taken under the lock */
    pthread_mutex_t lock;
    const struct wm_file *f;
    int write;
    int err;
};

static void *io_worker(void *arg)
{
    struct ioqueue *q = arg;
    for (;;) {
        pthread_mutex_lock(&q->lock);
        int64_t i = q->next < q->n ? q->next++ : -1;
        pthread_mutex_unlock(&q->lock);
        if (i < 0) {
            return NULL;
        }
        struct ioreq *r = &q->r[i];
        int64_t done = 0;
        while (done < r->len) {
            ssize_t n = q->write ? weft_pwrite(q->f->wf, r->buf + done, (size_t)(r->len - done), r->off + done)
                                 : weft_pread(q->f->wf, r->buf + done, (size_t)(r->len - done), r->off + done);
            if (n < 0) {
                pthread_mutex_lock(&q->lock);
                q->err = (int)-n;
                pthread_mutex_unlock(&q->lock);
                break;
            }
            if (n == 0) {
                /* past the end of the file: what is not there reads as zeros */
                memset(r->buf + done, 0, (size_t)(r->len - done));
                break;
            }
            done += n;
        }
    }
}

static int cmp_ioreq(const void *a, const void *b)
{
    const struct ioreq *x = a, *y = b;
    if (x->ost != y->ost) {
        return x->ost < y->ost ? -1 : 1;
    }
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Runs the requests, at most f->throttle at once per OST; 0 or an errno. */
static int run_io(const struct wm_file *f, struct ioreq *r, int64_t n, int write)
{
    if (n == 0) {
        return 0;
    }
    qsort(r, (size_t)n, sizeof(*r), cmp_ioreq);
    int nq = 0;
    for (int64_t i = 0; i < n; i++) {
        nq += i == 0 || r[i].ost != r[i - 1].ost;
    }
    struct ioqueue *q = calloc((size_t)nq, sizeof(*q));
    int k = -1;
    for (int64_t i = 0; i < n; i++) {
        if (i == 0 || r[i].ost != r[i - 1].ost) {
            k++;
            q[k].r = &r[i];
            q[k].f = f;
            q[k].write = write;
            pthread_mutex_init(&q[k].lock, NULL);
        }
        q[k].n++;
    }
    int total = 0;
    for (k = 0; k < nq; k++) {
        total += q[k].n < f->throttle ? (int)q[k].n : f->throttle;
    }
    pthread_t *th = malloc(sizeof(pthread_t) * (size_t)total);
    int started = 0;
    /* The calling thread takes the first queue's first share itself when there is one
     * thread in all (throttle 1, one OST): no thread to start. */
    if (total == 1) {
        io_worker(&q[0]);
    } else {
        for (k = 0; k < nq; k++) {
            int m = q[k].n < f->throttle ? (int)q[k].n : f->throttle;
            for (int j = 0; j < m; j++) {
                if (pthread_create(&th[started], NULL, io_worker, &q[k]) == 0) {
                    started++;
                } else {
                    io_worker(&q[k]);
                }
            }
        }
        for (int j = 0; j < started; j++) {
            pthread_join(th[j], NULL);
        }
    }
    int err = 0;
    for (k = 0; k < nq; k++) {
        if (q[k].err && !err) {
            err = q[k].err;
        }
        pthread_mutex_destroy(&q[k].lock);
    }
    free(th);
    free(q);
    return err;
}

/* ---- one window at an aggregator ---- */

/* A piece as the aggregator holds it: where its bytes are in the exchange buffer. */
struct apiece {
    int64_t off, len;
    char *data;
};

static int cmp_apiece(const void *a, const void *b)
{
    const struct apiece *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/*
 * The I/O of one window at an aggregator over its pieces (sorted here). Extents: runs of
 * pieces in one stripe whose gaps are at most `hole_max`; an extent with a gap is read
 * first on a write (read-modify-write, as ROMIO's data sieving; not past `size0`, the
 * file's size when the call began: nobody else writes these stripes), then every extent is
 * written in requests of at most rpc_size. On a read, the extents are read and the pieces
 * copied out of them.
 */
static int window_io(const struct wm_file *f, int write, struct apiece *p, int64_t n, char **ebuf, size_t *ebuf_cap,
                     int64_t size0)
{
    if (n == 0) {
        return 0;
    }
    qsort(p, (size_t)n, sizeof(*p), cmp_apiece);
    int64_t S = f->stripe_size, hole_max = S;
    /* extents: [start, end), hole flag, first piece */
    int64_t ne = 0, total = 0;
    int64_t *es = malloc(sizeof(int64_t) * 4 * (size_t)n);
    int64_t *ee = es + n, *eh = es + 2 * n, *eb = es + 3 * n;
    for (int64_t i = 0; i < n; i++) {
        int64_t end = p[i].off + p[i].len;
        if (ne > 0 && p[i].off / S == (ee[ne - 1] - 1) / S && p[i].off - ee[ne - 1] <= hole_max) {
            if (p[i].off > ee[ne - 1]) {
                eh[ne - 1] = 1;
            }
            if (end > ee[ne - 1]) {
                total += end - ee[ne - 1];
                ee[ne - 1] = end;
            }
            continue;
        }
        es[ne] = p[i].off;
        ee[ne] = end;
        eh[ne] = 0;
        eb[ne] = total;
        total += end - p[i].off;
        ne++;
    }
    grow(ebuf, ebuf_cap, (size_t)total);
    char *buf = *ebuf;
    /* requests */
    int64_t nr = 0, rcap = ne + total / f->rpc_size + 1;
    struct ioreq *r = malloc(sizeof(*r) * (size_t)rcap);
    int err = 0;
    for (int pass = 0; pass < 2 && !err; pass++) {
        int rd = pass == 0;
        nr = 0;
        for (int64_t e = 0; e < ne; e++) {
            if (rd && write && !eh[e]) {
                continue;
            }
            if (rd && write && es[e] >= size0) {
                /* past the end the file had when the call began: its gaps read as zeros */
                memset(buf + eb[e], 0, (size_t)(ee[e] - es[e]));
                continue;
            }
            if (!rd && !write) {
                continue;
            }
            for (int64_t o = es[e]; o < ee[e]; o += f->rpc_size) {
                int64_t len = ee[e] - o < f->rpc_size ? ee[e] - o : f->rpc_size;
                r[nr].off = o;
                r[nr].len = len;
                r[nr].buf = buf + eb[e] + (o - es[e]);
                r[nr].ost = (o / S) % f->stripe_count;
                nr++;
            }
        }
        if (rd) {
            err = run_io(f, r, nr, 0);
            if (err) {
                break;
            }
            if (write) {
                /* the new bytes over what was read */
                int64_t e = 0;
                for (int64_t i = 0; i < n; i++) {
                    while (!(p[i].off >= es[e] && p[i].off < ee[e])) {
                        e++;
                    }
                    memcpy(buf + eb[e] + (p[i].off - es[e]), p[i].data, (size_t)p[i].len);
                }
            } else {
                int64_t e = 0;
                for (int64_t i = 0; i < n; i++) {
                    while (!(p[i].off >= es[e] && p[i].off < ee[e])) {
                        e++;
                    }
                    memcpy(p[i].data, buf + eb[e] + (p[i].off - es[e]), (size_t)p[i].len);
                }
            }
        } else {
            err = run_io(f, r, nr, 1);
        }
    }
    free(r);
    free(es);
    return err;
}

/* ---- the collective call ---- */

/* A window's write at an aggregator, run in a thread while the next window is exchanged. */
struct iojob {
    const struct wm_file *f;
    struct apiece *ap;
    int64_t n;
    char **ebuf;
    size_t *ebuf_cap;
    int64_t size0;
    int err;
    int running;
    pthread_t th;
};

static void *io_job(void *arg)
{
    struct iojob *j = arg;
    j->err = window_io(j->f, 1, j->ap, j->n, j->ebuf, j->ebuf_cap, j->size0);
    return NULL;
}

/* Waits for the job's write; its error, or 0. */
static int io_join(struct iojob *j)
{
    if (!j->running) {
        return 0;
    }
    pthread_join(j->th, NULL);
    j->running = 0;
    return j->err;
}

int wm_collective(struct wm_file *f, int write, int64_t pos, void *ubuf, int count, MPI_Datatype type)
{
    double t0 = MPI_Wtime();
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
    /* The range the call covers, over all ranks. */
    int64_t lohi[2] = {v.n ? v.p[0].off : INT64_MAX, v.n ? -(v.p[v.n - 1].off + v.p[v.n - 1].len) : INT64_MAX};
    int64_t glohi[2];
    MPI_Allreduce(lohi, glohi, 2, MPI_INT64_T, MPI_MIN, f->comm);
    int64_t lo = glohi[0], hi = -glohi[1];
    /* weft_align=disable (to measure what alignment gives): even byte ranges of [lo, hi) as
     * the domains, as ROMIO's generic code makes them, each in windows of cb_buffer_size;
     * the pieces are cut at those boundaries too. */
    int aligned = f->align;
    int64_t D = 1, cbw = f->cb_buffer_size;
    if (!aligned && lo != INT64_MAX) {
        D = (hi - lo + A - 1) / A;
        struct pvec w = {0};
        for (int64_t i = 0; i < v.n && !err; i++) {
            int64_t off = v.p[i].off, len = v.p[i].len, m = v.p[i].mem;
            while (len > 0) {
                int64_t ds = lo + (off - lo) / D * D;
                int64_t nb = ds + ((off - ds) / cbw + 1) * cbw;
                if (nb > ds + D) {
                    nb = ds + D;
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
#define OWN(off) (aligned ? owner(f, (off)) : (int)(((off) - lo) / D))
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
    MPI_Alltoall(cnt_to, 1, MPI_INT, cnt_from, 1, MPI_INT, f->comm);
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
    MPI_Alltoallv(slist, sc, sd, MPI_INT64_T, rlist, rc, rd, MPI_INT64_T, f->comm);

    /* The windows: rows of stripes, as many as fill cb_buffer_size at an aggregator. */
    int64_t S = f->stripe_size, C = f->stripe_count;
    int64_t owned_max = (C + A - 1) / A;
    int64_t rows = f->cb_buffer_size / (S * owned_max);
    if (rows < 1) {
        rows = 1;
    }
    int64_t win = rows * S * C;
    int64_t w0 = lo == INT64_MAX ? 0 : lo / win * win;
    int64_t nsteps = lo == INT64_MAX ? 0 : (hi - w0 + win - 1) / win;
    if (!aligned) {
        win = cbw;
        nsteps = lo == INT64_MAX ? 0 : (D + cbw - 1) / cbw;
    }
/* The end of window t for aggregator a. */
#define WHI(a) (aligned ? whi : lo + (int64_t)(a) * D + (t + 1) * cbw)

    /* Cursors: mine per aggregator, and at an aggregator per source rank. */
    int64_t *scur = malloc(sizeof(int64_t) * (size_t)A);
    memcpy(scur, bstart, sizeof(int64_t) * (size_t)A);
    int64_t *rcur = malloc(sizeof(int64_t) * (size_t)P), *rend = malloc(sizeof(int64_t) * (size_t)P);
    for (int r = 0; r < P; r++) {
        rcur[r] = rd[r] / 2;
        rend[r] = rcur[r] + cnt_from[r];
    }
    MPI_Request *req = malloc(sizeof(MPI_Request) * (size_t)(A + P));
    MPI_Status *st = malloc(sizeof(MPI_Status) * (size_t)(A + P));
    int64_t *sbytes = calloc((size_t)A, sizeof(int64_t)), *rbytes = calloc((size_t)P, sizeof(int64_t));
    int64_t *send_first = malloc(sizeof(int64_t) * (size_t)A);
    if (!f->sbuf) {
        f->sbuf = calloc((size_t)A, sizeof(char *));
        f->sbuf_cap = calloc((size_t)A, sizeof(size_t));
    }
    char **sbuf = f->sbuf;
    size_t *sbuf_cap = f->sbuf_cap;
    /* Two sets of buffers on a write: the I/O of window t runs while window t+1 is
     * exchanged into the other set. */
    char *xbs[2] = {f->xbuf, NULL}, *ebs[2] = {f->ebuf, NULL};
    size_t xcs[2] = {f->xbuf_cap, 0}, ecs[2] = {f->ebuf_cap, 0};
    struct apiece *aps[2] = {NULL, NULL};
    int64_t apcs[2] = {0, 0};
    struct iojob job[2];
    memset(job, 0, sizeof(job));

    /* The file's size as the call begins (the aggregators ask the servers): no extent past
     * it needs reading before it is written. */
    int64_t size_here = -1, size0 = INT64_MAX;
    if (write && my_a >= 0) {
        struct stat st;
        if (weft_fstat(f->wf, &st) == 0) {
            size_here = st.st_size;
        } else {
            size_here = INT64_MAX;
        }
    }
    if (write) {
        MPI_Allreduce(&size_here, &size0, 1, MPI_INT64_T, MPI_MAX, f->comm);
    }
    double t_io = 0, t_io0;
    for (int64_t t = 0; t < nsteps; t++) {
        int64_t wlo = w0 + t * win, whi = wlo + win;
        int tag = (int)(t % 30000);
        int nreq = 0;
        int set = write ? (int)(t & 1) : 0;
        if (write) {
            /* this set's last write (window t-2) is done before its buffers are reused */
            t_io0 = MPI_Wtime();
            int e = io_join(&job[set]);
            t_io += MPI_Wtime() - t_io0;
            if (e && !err) {
                err = e;
            }
        }
        char *xbuf = xbs[set];
        size_t xbuf_cap = xcs[set];
        struct apiece *ap = aps[set];
        int64_t ap_cap = apcs[set];
        /* This rank's pieces in the window, per aggregator. */
        for (int a = 0; a < A; a++) {
            int64_t i = scur[a], b = 0;
            send_first[a] = i;
            while (i < bstart[a + 1] && mine[i].off < WHI(a)) {
                b += mine[i].len;
                i++;
            }
            sbytes[a] = b;
        }
        /* At an aggregator: what each rank has in the window. */
        int64_t xtotal = 0, napieces = 0;
        if (my_a >= 0) {
            for (int r = 0; r < P; r++) {
                int64_t b = 0;
                for (int64_t i = rcur[r]; i < rend[r] && rlist[2 * i] < WHI(my_a); i++) {
                    b += rlist[2 * i + 1];
                    napieces++;
                }
                rbytes[r] = b;
                xtotal += b;
            }
            grow(&xbuf, &xbuf_cap, (size_t)xtotal);
            if (napieces > ap_cap) {
                free(ap);
                ap = malloc(sizeof(*ap) * (size_t)napieces);
                ap_cap = napieces;
            }
            xbs[set] = xbuf;
            xcs[set] = xbuf_cap;
            aps[set] = ap;
            apcs[set] = ap_cap;
            int64_t x = 0, k = 0;
            for (int r = 0; r < P; r++) {
                for (; rcur[r] < rend[r] && rlist[2 * rcur[r]] < WHI(my_a); rcur[r]++) {
                    ap[k].off = rlist[2 * rcur[r]];
                    ap[k].len = rlist[2 * rcur[r] + 1];
                    ap[k].data = xbuf + x;
                    x += ap[k].len;
                    k++;
                }
            }
        }
        if (write) {
            if (my_a >= 0) {
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
                grow(&sbuf[a], &sbuf_cap[a], (size_t)sbytes[a]);
                int64_t x = 0;
                for (int64_t i = send_first[a]; x < sbytes[a]; i++) {
                    memcpy(sbuf[a] + x, mem + mine[i].mem, (size_t)mine[i].len);
                    x += mine[i].len;
                }
                MPI_Isend(sbuf[a], (int)sbytes[a], MPI_BYTE, f->aggr_rank[a], tag, f->comm, &req[nreq++]);
            }
            MPI_Waitall(nreq, req, st);
            if (my_a >= 0 && napieces > 0) {
                struct iojob *j = &job[set];
                j->f = f;
                j->ap = ap;
                j->n = napieces;
                j->ebuf = &ebs[set];
                j->ebuf_cap = &ecs[set];
                j->size0 = size0;
                j->err = 0;
                if (pthread_create(&j->th, NULL, io_job, j) == 0) {
                    j->running = 1;
                } else {
                    io_job(j);
                    if (j->err && !err) {
                        err = j->err;
                    }
                }
            }
        } else {
            for (int a = 0; a < A; a++) {
                if (sbytes[a] == 0) {
                    continue;
                }
                grow(&sbuf[a], &sbuf_cap[a], (size_t)sbytes[a]);
                MPI_Irecv(sbuf[a], (int)sbytes[a], MPI_BYTE, f->aggr_rank[a], tag, f->comm, &req[nreq++]);
            }
            if (my_a >= 0) {
                /* window_io sorts the pieces: it fills xbuf in each rank's order. */
                t_io0 = MPI_Wtime();
                int e = window_io(f, 0, ap, napieces, &ebs[0], &ecs[0], 0);
                t_io += MPI_Wtime() - t_io0;
                if (e && !err) {
                    err = e;
                }
                int64_t x = 0;
                for (int r = 0; r < P; r++) {
                    if (rbytes[r] > 0) {
                        MPI_Isend(xbuf + x, (int)rbytes[r], MPI_BYTE, r, tag, f->comm, &req[nreq++]);
                    }
                    x += rbytes[r];
                }
            }
            MPI_Waitall(nreq, req, st);
            for (int a = 0; a < A; a++) {
                int64_t x = 0;
                for (int64_t i = send_first[a]; x < sbytes[a]; i++) {
                    memcpy(mem + mine[i].mem, sbuf[a] + x, (size_t)mine[i].len);
                    x += mine[i].len;
                }
            }
        }
        for (int a = 0; a < A; a++) {
            while (scur[a] < bstart[a + 1] && mine[scur[a]].off < WHI(a)) {
                scur[a]++;
            }
        }
    }
    for (int k = 0; k < 2; k++) {
        t_io0 = MPI_Wtime();
        int e = io_join(&job[k]);
        t_io += MPI_Wtime() - t_io0;
        if (e && !err) {
            err = e;
        }
    }
#undef WHI
#undef OWN
    if (!contig && !write && nbytes > 0) {
        int position = 0;
        MPI_Unpack(mem, (int)nbytes, &position, ubuf, count, type, MPI_COMM_SELF);
    }
    /* Every rank learns whether any failed. */
    int gerr = 0;
    MPI_Allreduce(&err, &gerr, 1, MPI_INT, MPI_MAX, f->comm);
    f->last_steps = nsteps;
    f->last_bytes = nbytes;
    if (wm_debug && f->rank == 0) {
        WM_DEBUG("%s: %lld bytes here, file [%lld, %lld), %d aggregators, window %lld bytes, %lld steps, "
                 "throttle %d, %.3f s (rank 0 as an aggregator waited %.3f s for its I/O)\n",
                 write ? "write_all" : "read_all", (long long)nbytes, (long long)(lo == INT64_MAX ? 0 : lo),
                 (long long)(lo == INT64_MAX ? 0 : hi), A, (long long)win, (long long)nsteps, f->throttle,
                 MPI_Wtime() - t0, t_io);
    }
    f->xbuf = xbs[0];
    f->xbuf_cap = xcs[0];
    f->ebuf = ebs[0];
    f->ebuf_cap = ecs[0];
    free(xbs[1]);
    free(ebs[1]);
    free(aps[0]);
    free(aps[1]);
    free(req);
    free(st);
    free(sbytes);
    free(rbytes);
    free(send_first);
    free(scur);
    free(rcur);
    free(rend);
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
    if (gerr) {
        errno = gerr;
        return MPI_ERR_IO;
    }
    return MPI_SUCCESS;
}
