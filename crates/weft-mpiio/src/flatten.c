/*
 * flatten.c: an MPI datatype as a list of (displacement, length) blocks, from the
 * constructor calls that made it (MPI_Type_get_envelope / MPI_Type_get_contents).
 * Contiguous, vector, hvector, indexed, hindexed, (h)indexed_block, struct, subarray,
 * resized and dup are taken; darray and the Fortran types are not (the caller then leaves
 * the file to the MPI library's own collective I/O).
 */
#include "internal.h"
#include <stdlib.h>
#include <string.h>

/* More blocks than this in one flattened type: leave it to the MPI library. */
#define WM_BLOCKS_MAX (64L << 20)

void wm_flat_free(struct wm_flat *f)
{
    free(f->b);
    memset(f, 0, sizeof(*f));
}

static int push(struct wm_flat *f, int64_t disp, int64_t len)
{
    if (len <= 0) {
        return 0;
    }
    f->size += len;
    if (f->n > 0 && f->b[f->n - 1].disp + f->b[f->n - 1].len == disp) {
        f->b[f->n - 1].len += len;
        return 0;
    }
    if (f->n == f->cap) {
        if (f->cap >= WM_BLOCKS_MAX) {
            return -1;
        }
        int64_t cap = f->cap ? f->cap * 2 : 16;
        struct wm_block *b = realloc(f->b, (size_t)cap * sizeof(*b));
        if (!b) {
            return -1;
        }
        f->b = b;
        f->cap = cap;
    }
    f->b[f->n].disp = disp;
    f->b[f->n].len = len;
    f->n++;
    return 0;
}

static int flatten_into(MPI_Datatype type, int64_t base, struct wm_flat *out);

/* Appends `count` consecutive copies of `child` at `base`. */
static int copies(MPI_Datatype child, int64_t base, int64_t count, struct wm_flat *out)
{
    MPI_Aint lb, ext;
    MPI_Type_get_extent(child, &lb, &ext);
    int size;
    MPI_Type_size(child, &size);
    MPI_Aint tlb, text;
    MPI_Type_get_true_extent(child, &tlb, &text);
    /* A child whose bytes fill its extent with no gap: one block for all copies. */
    if (size == ext && text == ext && tlb == lb) {
        return push(out, base + lb, count * (int64_t)ext);
    }
    for (int64_t i = 0; i < count; i++) {
        if (flatten_into(child, base + i * (int64_t)ext, out) != 0) {
            return -1;
        }
    }
    return 0;
}

static int is_named(MPI_Datatype t)
{
    int ni, na, nd, comb;
    MPI_Type_get_envelope(t, &ni, &na, &nd, &comb);
    return comb == MPI_COMBINER_NAMED;
}

/* C-order or Fortran-order subarray rows, from dimension `d` (slowest first in `dims`). */
static int subarray_rows(int nd, const int *sizes, const int *subs, const int *starts, const int *perm, int d,
                         int64_t base, int64_t ext, MPI_Datatype old, struct wm_flat *out)
{
    int dim = perm[d];
    int64_t stride = ext;
    for (int k = d + 1; k < nd; k++) {
        stride *= sizes[perm[k]];
    }
    if (d == nd - 1) {
        return copies(old, base + (int64_t)starts[dim] * ext, subs[dim], out);
    }
    for (int i = 0; i < subs[dim]; i++) {
        int64_t b = base + ((int64_t)starts[dim] + i) * stride;
        if (subarray_rows(nd, sizes, subs, starts, perm, d + 1, b, ext, old, out) != 0) {
            return -1;
        }
    }
    return 0;
}

static int flatten_into(MPI_Datatype type, int64_t base, struct wm_flat *out)
{
    int ni, na, nd, comb;
    MPI_Type_get_envelope(type, &ni, &na, &nd, &comb);
    if (comb == MPI_COMBINER_NAMED) {
        int size;
        MPI_Type_size(type, &size);
        MPI_Aint lb, ext;
        MPI_Type_get_true_extent(type, &lb, &ext);
        /* A named type with gaps (MPI_DOUBLE_INT...): its true extent is not its size. */
        if ((MPI_Aint)size != ext) {
            return -1;
        }
        return push(out, base + lb, size);
    }
    int *ints = malloc(sizeof(int) * (size_t)(ni + 1));
    MPI_Aint *addrs = malloc(sizeof(MPI_Aint) * (size_t)(na + 1));
    MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * (size_t)(nd + 1));
    int rc = -1;
    if (!ints || !addrs || !types) {
        goto out;
    }
    MPI_Type_get_contents(type, ni, na, nd, ints, addrs, types);
    MPI_Aint lb, ext;
    switch (comb) {
    case MPI_COMBINER_DUP:
    case MPI_COMBINER_RESIZED:
        rc = flatten_into(types[0], base, out);
        break;
    case MPI_COMBINER_CONTIGUOUS:
        rc = copies(types[0], base, ints[0], out);
        break;
    case MPI_COMBINER_VECTOR:
    case MPI_COMBINER_HVECTOR:
        MPI_Type_get_extent(types[0], &lb, &ext);
        rc = 0;
        for (int i = 0; i < ints[0] && rc == 0; i++) {
            int64_t stride = comb == MPI_COMBINER_VECTOR ? (int64_t)ints[2] * ext : (int64_t)addrs[0];
            rc = copies(types[0], base + i * stride, ints[1], out);
        }
        break;
    case MPI_COMBINER_INDEXED:
    case MPI_COMBINER_HINDEXED:
        MPI_Type_get_extent(types[0], &lb, &ext);
        rc = 0;
        for (int i = 0; i < ints[0] && rc == 0; i++) {
            int64_t d = comb == MPI_COMBINER_INDEXED ? (int64_t)ints[1 + ints[0] + i] * ext : (int64_t)addrs[i];
            rc = copies(types[0], base + d, ints[1 + i], out);
        }
        break;
    case MPI_COMBINER_INDEXED_BLOCK:
    case MPI_COMBINER_HINDEXED_BLOCK:
        MPI_Type_get_extent(types[0], &lb, &ext);
        rc = 0;
        for (int i = 0; i < ints[0] && rc == 0; i++) {
            int64_t d = comb == MPI_COMBINER_INDEXED_BLOCK ? (int64_t)ints[2 + i] * ext : (int64_t)addrs[i];
            rc = copies(types[0], base + d, ints[1], out);
        }
        break;
    case MPI_COMBINER_STRUCT:
        rc = 0;
        for (int i = 0; i < ints[0] && rc == 0; i++) {
            rc = copies(types[i], base + (int64_t)addrs[i], ints[1 + i], out);
        }
        break;
    case MPI_COMBINER_SUBARRAY: {
        int n = ints[0];
        const int *sizes = ints + 1, *subs = ints + 1 + n, *starts = ints + 1 + 2 * n;
        int order = ints[1 + 3 * n];
        int perm[64];
        if (n > 64) {
            break;
        }
        for (int k = 0; k < n; k++) {
            perm[k] = order == MPI_ORDER_C ? k : n - 1 - k;
        }
        MPI_Type_get_extent(types[0], &lb, &ext);
        int empty = 0;
        for (int k = 0; k < n; k++) {
            empty |= subs[k] == 0;
        }
        rc = empty ? 0 : subarray_rows(n, sizes, subs, starts, perm, 0, base, ext, types[0], out);
        break;
    }
    default:
        rc = -1;
        break;
    }
    for (int i = 0; i < nd; i++) {
        if (!is_named(types[i])) {
            MPI_Type_free(&types[i]);
        }
    }
out:
    free(ints);
    free(addrs);
    free(types);
    return rc;
}

int wm_flatten(MPI_Datatype type, struct wm_flat *out)
{
    memset(out, 0, sizeof(*out));
    MPI_Aint lb, ext;
    MPI_Type_get_extent(type, &lb, &ext);
    out->lb = lb;
    out->extent = ext;
    if (flatten_into(type, 0, out) != 0) {
        wm_flat_free(out);
        return -1;
    }
    return 0;
}
