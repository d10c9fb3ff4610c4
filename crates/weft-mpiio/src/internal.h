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
    char *xbuf, *ebuf;
    size_t xbuf_cap, ebuf_cap;
    char **sbuf;      /* per aggregator */
    size_t *sbuf_cap;
    /* statistics of the last collective call (for debug output) */
    int64_t last_steps, last_bytes;
};

extern int wm_debug;
#define WM_DEBUG(...) do { if (wm_debug) { fprintf(stderr, "weft-mpiio: " __VA_ARGS__); } } while (0)

/* flatten.c */
void wm_flat_free(struct wm_flat *f);
/* Flattens `type`; 0 on success, -1 when it holds a constructor the layer does not take. */
int wm_flatten(MPI_Datatype type, struct wm_flat *out);

/* twophase.c */
/* The collective write (write != 0) or read of `count` `type`s at byte offset `pos` of the
 * view's data stream; MPI_SUCCESS or an MPI error class. */
int wm_collective(struct wm_file *f, int write, int64_t pos, void *buf, int count, MPI_Datatype type);
/* Aggregators and their ranks for the file's layout. */
void wm_choose_aggregators(struct wm_file *f);
/* Frees the exchange buffers. */
void wm_free_buffers(struct wm_file *f);

#endif
