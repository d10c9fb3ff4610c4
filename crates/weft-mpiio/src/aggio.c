/*
 * aggio.c: the I/O an aggregator does for one window of a collective call (twophase.c):
 * its pieces merged into extents (a stripe at most each), read first where they have gaps
 * on a write (read-modify-write), then written or read in requests of at most rpc_size,
 * with at most `throttle` requests in flight per OST (threads: libweft's calls block).
 * Under WEFT_MPIIO_DEBUG the time and bytes of the libweft calls are counted (struct
 * wm_iostat) for the time split of a collective call.
 */
#include "internal.h"
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double wm_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void wm_grow(char **buf, size_t *cap, size_t need)
{
    if (need > *cap) {
        free(*buf);
        *buf = malloc(need);
        *cap = need;
    }
}

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
    struct wm_iostat st; /* under the lock */
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
            double t0 = wm_debug ? wm_now() : 0;
            char *b = r->buf + done;
            size_t len = (size_t)(r->len - done);
            ssize_t n;
            if (q->f->fd >= 0) {
                /* weft_io=mount: through the FUSE mount (its page cache and write-back) */
                n = q->write ? pwrite(q->f->fd, b, len, r->off + done) : pread(q->f->fd, b, len, r->off + done);
                n = n < 0 ? -errno : n;
            } else {
                n = q->write ? weft_pwrite(q->f->wf, b, len, r->off + done) : weft_pread(q->f->wf, b, len, r->off + done);
            }
            if (wm_debug) {
                double dt = wm_now() - t0;
                pthread_mutex_lock(&q->lock);
                int w = q->write;
                q->st.calls[w]++;
                q->st.bytes[w] += n > 0 ? n : 0;
                q->st.call_s[w] += dt;
                if (dt > q->st.call_max[w]) {
                    q->st.call_max[w] = dt;
                }
                pthread_mutex_unlock(&q->lock);
            }
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
static int run_io(const struct wm_file *f, struct ioreq *r, int64_t n, int write, struct wm_iostat *st)
{
    if (n == 0) {
        return 0;
    }
    double t_run = wm_now();
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
        wm_iostat_add(st, &q[k].st);
        pthread_mutex_destroy(&q[k].lock);
    }
    free(th);
    free(q);
    st->wall[write] += wm_now() - t_run;
    return err;
}

/* Appends to `r` the requests of `len` bytes at file offset `off` (within one stripe),
 * `buf` their memory: at most rpc_size each. How many it appended (at most
 * len / rpc_size + 1). */
static int64_t cut_requests(const struct wm_file *f, struct ioreq *r, int64_t off, int64_t len, char *buf)
{
    int64_t nr = 0;
    for (int64_t o = 0; o < len; o += f->rpc_size, nr++) {
        r[nr].off = off + o;
        r[nr].len = len - o < f->rpc_size ? len - o : f->rpc_size;
        r[nr].buf = buf + o;
        r[nr].ost = (off / f->stripe_size) % f->stripe_count;
    }
    return nr;
}

/* ---- a rank's own pieces, where they are ---- */

int wm_direct_io(const struct wm_file *f, int write, const struct wm_apiece *p, int64_t n, struct wm_iostat *st)
{
    int64_t S = f->stripe_size, nr = 0, bytes = 0;
    for (int64_t i = 0; i < n; i++) {
        bytes += p[i].len;
    }
    struct ioreq *r = malloc(sizeof(*r) * (size_t)(n + bytes / f->rpc_size + 1));
    for (int64_t i = 0; i < n;) {
        /* pieces that continue each other in the file and in memory, in one stripe, as one */
        int64_t off = p[i].off, len = p[i].len;
        char *data = p[i].data;
        for (i++; i < n && p[i].off == off + len && p[i].data == data + len && p[i].off / S == off / S; i++) {
            len += p[i].len;
        }
        nr += cut_requests(f, r + nr, off, len, data);
    }
    int err = run_io(f, r, nr, write, st);
    free(r);
    return err;
}

/* ---- one window at an aggregator ---- */

static int cmp_apiece(const void *a, const void *b)
{
    const struct wm_apiece *x = a, *y = b;
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
int wm_window_io(const struct wm_file *f, int write, struct wm_apiece *p, int64_t n, char **ebuf, size_t *ebuf_cap,
                 int64_t size0, struct wm_iostat *st)
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
    wm_grow(ebuf, ebuf_cap, (size_t)total);
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
            nr += cut_requests(f, r + nr, es[e], ee[e] - es[e], buf + eb[e]);
        }
        if (rd) {
            err = run_io(f, r, nr, 0, st);
            if (err) {
                break;
            }
            double t_copy = wm_now();
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
            st->copy_s += wm_now() - t_copy;
        } else {
            err = run_io(f, r, nr, 1, st);
        }
    }
    free(r);
    free(es);
    return err;
}

