/*
 * internal.h: the state the Weft MPI-IO layer keeps beside each MPI_File it took.
 *
 * Why C: mpi.h is a C header whose types and constants differ between OpenMPI and MPICH
 * (MPI_File, MPI_Datatype, MPI_Comm are pointers in one and ints in the other, the
 * MPI_COMBINER_* values differ), and the PMPI profiling interface is a set of C symbols a
 * library defines to interpose on the MPI library's own. The layer is compiled once per MPI
 * implementation with that implementation's mpicc; a Rust binding would have to be
 * generated per implementation too and would add nothing to what are mostly calls into MPI
 * and libweft's C API.
 */
#ifndef WEFT_MPIIO_INTERNAL_H
#define WEFT_MPIIO_INTERNAL_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <weft.h>

/* One contiguous piece of a flattened datatype: `len` bytes at displacement `disp`. */
struct wm_block {
    int64_t disp;
    int64_t len;
};

/* A flattened type: blocks in type-map order, their total size, and the type's extent. */
struct wm_flat {
    struct wm_block *b;
    int64_t n, cap;
    int64_t size;   /* sum of the lengths */
    int64_t lb, extent;
};

/* What the layer knows of a file it took at MPI_File_open. */
struct wm_file {
    MPI_File fh;            /* the MPI library's handle, open on the FUSE mount */
    MPI_Comm comm;          /* a duplicate of the open's communicator, for the exchange */
    int rank, nprocs;
    weft_file *wf;          /* the same file through libweft */
    int writable;
    char *path;             /* path inside the file system */
    /* layout */
    int64_t stripe_count, stripe_size;
    uint64_t *osts;         /* OST index of each stripe */
    /* hints */
    int throttle;           /* requests in flight per OST at an aggregator */
    int64_t cb_buffer_size; /* collective buffer per aggregator per step */
    int cb_nodes;           /* aggregators asked (0: one per OST, at most nprocs) */
    int enabled;            /* weft_collective: 0 sends collective calls to PMPI */
    int64_t rpc_size;       /* largest single pread/pwrite an aggregator sends */
    int align;              /* weft_align: domains of whole stripes (1), or even byte ranges */
    int placement;          /* weft_placement: WM_PLACE_OST or WM_PLACE_RANK */
    int exchange;           /* weft_exchange: WM_XCHG_STEPWISE or WM_XCHG_ALLTOALLV */
    int io_mount;           /* weft_io=mount: aggregators' I/O by pwrite/pread on the mount */
    int fd;                 /* the file open on the mount (weft_io=mount), or -1 */
    int wait_sleep;         /* weft_wait=sleep: wait for messages polling with sleeps */
    int direct;             /* weft_direct=automatic: each rank its own I/O when no two
                             * ranks' ranges interleave (0: always the two phases) */
    /* chosen */
    int naggr;
    int *aggr_rank;         /* rank of aggregator a */
    /* view */
    int view_ok;            /* the view's filetype could be flattened */
    int64_t disp;
    int64_t etype_size;
    struct wm_flat ft;      /* the filetype, flattened */
    /* exchange buffers, kept from call to call (freed at close): large ones would be new
     * mappings, faulted in page by page, at every call */
    char *xbuf[2], *ebuf[2]; /* two sets: a window's write runs while the next is exchanged */
    size_t xbuf_cap[2], ebuf_cap[2];
    char *sbuf;       /* what this rank sends the aggregators (receives from them) in a window */
    size_t sbuf_cap;
    /* statistics of the last collective call (for debug output) */
    int64_t last_steps, last_bytes;
};

/* weft_placement: the K computer's (one aggregator per OST group, spread over the ranks,
 * owning every stripe of its OSTs), or ROMIO's generic one (aggregators the first cb_nodes
 * ranks, each a contiguous range of the call's extent: every aggregator writes to every
 * OST). */
enum { WM_PLACE_OST = 0, WM_PLACE_RANK = 1 };
/* weft_exchange: point to point with the aggregators, window by window, or one
 * MPI_Alltoallv of the whole communicator per window. */
enum { WM_XCHG_STEPWISE = 0, WM_XCHG_ALLTOALLV = 1 };

extern int wm_debug;
#define WM_DEBUG(...) do { if (wm_debug) { fprintf(stderr, "weft-mpiio: " __VA_ARGS__); } } while (0)

/* flatten.c */
void wm_flat_free(struct wm_flat *f);
/* Flattens `type`; 0 on success, -1 when it holds a constructor the layer does not take. */
int wm_flatten(MPI_Datatype type, struct wm_flat *out);

/* aggio.c */
/* What an aggregator's libweft calls took ([0] reads, [1] writes), under WEFT_MPIIO_DEBUG. */
struct wm_iostat {
    int64_t calls[2], bytes[2];
    double call_s[2];   /* summed over the calls (they overlap: up to throttle x OSTs) */
    double call_max[2]; /* the longest call */
    double wall[2];     /* wall time of the throttled runs */
    double copy_s;      /* pieces copied into / out of the extents */
};
static inline void wm_iostat_add(struct wm_iostat *to, const struct wm_iostat *x)
{
    for (int w = 0; w < 2; w++) {
        to->calls[w] += x->calls[w];
        to->bytes[w] += x->bytes[w];
        to->call_s[w] += x->call_s[w];
        to->call_max[w] = x->call_max[w] > to->call_max[w] ? x->call_max[w] : to->call_max[w];
        to->wall[w] += x->wall[w];
    }
    to->copy_s += x->copy_s;
}
/* A piece as the aggregator holds it: where its bytes are in the exchange buffer. */
struct wm_apiece {
    int64_t off, len;
    char *data;
};
double wm_now(void);
/* A buffer kept from call to call, made at least `need` bytes (its old contents are not kept). */
void wm_grow(char **buf, size_t *cap, size_t need);
/* A rank's own pieces (in file order, none across a stripe boundary) written or read where
 * they are in its buffer, with no exchange: requests of at most rpc_size within a stripe,
 * at most `throttle` in flight per OST; 0 or an errno. */
int wm_direct_io(const struct wm_file *f, int write, const struct wm_apiece *p, int64_t n, struct wm_iostat *st);
/* The I/O of one window at an aggregator over its pieces (sorted here); 0 or an errno. */
int wm_window_io(const struct wm_file *f, int write, struct wm_apiece *p, int64_t n, char **ebuf, size_t *ebuf_cap,
                 int64_t size0, struct wm_iostat *st);

/* twophase.c */
/* The collective write (write != 0) or read of `count` `type`s at byte offset `pos` of the
 * view's data stream; MPI_SUCCESS or an MPI error class. */
int wm_collective(struct wm_file *f, int write, int64_t pos, void *buf, int count, MPI_Datatype type);
/* Aggregators and their ranks for the file's layout. */
void wm_choose_aggregators(struct wm_file *f);
/* MPI_Waitall, or with f->wait_sleep a poll of MPI_Testall with short sleeps. */
void wm_wait_all(const struct wm_file *f, int n, MPI_Request *req, MPI_Status *st);
/* The same with the choice given (sleep: poll with sleeps), for the collectives of an open
 * before its wm_file exists. */
void wm_wait(int sleep, int n, MPI_Request *req, MPI_Status *st);
/* Every collective the layer makes is one of these: started nonblocking and waited for
 * as wm_wait does. MPICH's ch4 spins in a blocking collective without yielding, and with
 * more ranks than cores each of its steps then waits for the scheduler to run the rank it
 * needs (a blocking MPI_Comm_split_type took 49 ms at 4 ranks on 2 cores, its nonblocking
 * form polled with sleeps well under 1; docs/BENCHMARKS.md, MPI-IO under MPICH). */
void wm_allreduce(int sleep, const void *in, void *out, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm);
void wm_bcast(int sleep, void *buf, int n, MPI_Datatype t, int root, MPI_Comm comm);
void wm_alltoall(int sleep, const void *in, void *out, int n, MPI_Datatype t, MPI_Comm comm);
void wm_allgather(int sleep, const void *in, void *out, int n, MPI_Datatype t, MPI_Comm comm);
void wm_alltoallv(int sleep, const void *sb, const int *sc, const int *sd, void *rb, const int *rc, const int *rd,
                  MPI_Datatype t, MPI_Comm comm);
void wm_barrier(int sleep, MPI_Comm comm);
void wm_comm_dup(int sleep, MPI_Comm comm, MPI_Comm *out);
/* Frees the exchange buffers. */
void wm_free_buffers(struct wm_file *f);

#endif
