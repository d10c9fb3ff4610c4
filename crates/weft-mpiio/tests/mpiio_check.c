/*
 * mpiio_check: writes and reads back patterns of one shared file through MPI-IO and checks
 * every byte: contiguous, 1-D vector, indexed, 2-D subarray (also from a memory buffer with
 * halo cells), each written collectively and read independently, then written
 * independently and read collectively, and also read through POSIX (the FUSE mount).
 * Sizes do not divide evenly by the ranks, the stripes or the blocks.
 *
 *   mpirun -n P mpiio_check DIR STRIPE_COUNT STRIPE_SIZE [SCALE]
 *
 * With WEFT_EXPECT_LAYER=1 it also checks that the Weft layer took the files
 * (MPI_File_get_info: weft_collective=enable, the striping asked, and weft_placement,
 * weft_exchange and weft_io as WEFT_MPIIO_PLACEMENT, _EXCHANGE and _IO ask). Prints "all checks
 * held" at the end; exits non-zero (MPI_Abort) at the first wrong byte.
 */
#include <fcntl.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int rank, nprocs;
static const char *dir;
static int stripe_count, stripe_size, scale, expect_layer;

static unsigned char pat(int64_t o, int round)
{
    return (unsigned char)(o * 131 + (o >> 8) * 7 + (o >> 16) * 3 + 1 + round * 17);
}

#define FAIL(...)                                                                                                      \
    do {                                                                                                               \
        fprintf(stderr, "rank %d: ", rank);                                                                            \
        fprintf(stderr, __VA_ARGS__);                                                                                  \
        fprintf(stderr, "\n");                                                                                         \
        MPI_Abort(MPI_COMM_WORLD, 1);                                                                                  \
    } while (0)

#define CHECK_MPI(call)                                                                                                \
    do {                                                                                                               \
        int rc_ = (call);                                                                                              \
        if (rc_ != MPI_SUCCESS) {                                                                                      \
            char msg_[MPI_MAX_ERROR_STRING];                                                                           \
            int len_;                                                                                                  \
            MPI_Error_string(rc_, msg_, &len_);                                                                        \
            FAIL("%s failed: %s", #call, msg_);                                                                        \
        }                                                                                                              \
    } while (0)

/* A pattern on this rank: the view, and the file ranges of its data stream in order. */
struct pattern {
    char name[64];
    MPI_Offset disp;
    MPI_Datatype etype, ftype; /* ftype MPI_DATATYPE_NULL: the default view, at offset `start` */
    int esize;
    int64_t start;
    int64_t nr, *roff, *rlen;
    int64_t nbytes, file_size;
    int halo; /* 2-D: the memory buffer has one halo cell around (rows x cols doubles) */
    int rows, cols;
};

static void add_range(struct pattern *p, int64_t off, int64_t len)
{
    if (len <= 0) {
        return;
    }
    p->roff = realloc(p->roff, sizeof(int64_t) * (size_t)(p->nr + 1));
    p->rlen = realloc(p->rlen, sizeof(int64_t) * (size_t)(p->nr + 1));
    p->roff[p->nr] = off;
    p->rlen[p->nr] = len;
    p->nr++;
    p->nbytes += len;
}

/* The expected data stream of this rank. */
static unsigned char *stream(const struct pattern *p, int round)
{
    unsigned char *d = malloc((size_t)p->nbytes + 1);
    int64_t k = 0;
    for (int64_t r = 0; r < p->nr; r++) {
        for (int64_t i = 0; i < p->rlen[r]; i++) {
            d[k++] = pat(p->roff[r] + i, round);
        }
    }
    return d;
}

static void make_contiguous(struct pattern *p)
{
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "contiguous");
    int64_t base = (int64_t)scale * 300007;
    int64_t start = 0;
    for (int r = 0; r < rank; r++) {
        start += base + r * 4099;
    }
    p->start = start;
    p->ftype = MPI_DATATYPE_NULL;
    p->etype = MPI_BYTE;
    p->esize = 1;
    add_range(p, start, base + rank * 4099);
    for (int r = 0; r < nprocs; r++) {
        p->file_size += base + r * 4099;
    }
}

static void make_vector(struct pattern *p)
{
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "vector");
    int blk = 1000 + 7, count = scale * 211 + 3;
    /* each rank's block j at (j * nprocs + rank) * blk; the filetype's extent covers all */
    MPI_Datatype v;
    MPI_Type_vector(count, blk, blk * nprocs, MPI_BYTE, &v);
    MPI_Type_create_resized(v, 0, (MPI_Aint)count * blk * nprocs, &p->ftype);
    MPI_Type_free(&v);
    MPI_Type_commit(&p->ftype);
    p->etype = MPI_BYTE;
    p->esize = 1;
    p->disp = (MPI_Offset)rank * blk + 123;
    for (int j = 0; j < count; j++) {
        add_range(p, p->disp + (int64_t)(j * nprocs) * blk, blk);
    }
    p->file_size = 123 + (int64_t)count * blk * nprocs;
}

static void make_indexed(struct pattern *p)
{
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "indexed");
    int slots = scale * 97 * nprocs + 5;
    int *len = malloc(sizeof(int) * (size_t)slots), *disp = malloc(sizeof(int) * (size_t)slots);
    int n = 0;
    int64_t o = 0;
    for (int j = 0; j < slots; j++) {
        int l = 500 + (int)((j * 7919L) % 6000);
        int gap = (j % 5 == 0) ? 77 : 0;
        o += gap;
        if (j % nprocs == rank) {
            len[n] = l;
            disp[n] = (int)o;
            add_range(p, o, l);
            n++;
        }
        o += l;
    }
    p->file_size = o;
    MPI_Type_indexed(n, len, disp, MPI_BYTE, &p->ftype);
    MPI_Datatype r;
    MPI_Type_create_resized(p->ftype, 0, (MPI_Aint)o, &r);
    MPI_Type_free(&p->ftype);
    p->ftype = r;
    MPI_Type_commit(&p->ftype);
    p->etype = MPI_BYTE;
    p->esize = 1;
    free(len);
    free(disp);
}

/* A 2-D array of doubles split over a process grid, unevenly. */
static void make_subarray(struct pattern *p, int halo)
{
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), halo ? "subarray-halo" : "subarray");
    int pr = 1, pc = nprocs;
    for (int d = 1; d * d <= nprocs; d++) {
        if (nprocs % d == 0) {
            pr = d;
            pc = nprocs / d;
        }
    }
    int G[2] = {scale * 97 + 13, scale * 131 + 7};
    int me[2] = {rank / pc, rank % pc};
    int grid[2] = {pr, pc};
    int sub[2], st[2];
    for (int d = 0; d < 2; d++) {
        int q = G[d] / grid[d], rem = G[d] % grid[d];
        sub[d] = q + (me[d] < rem);
        st[d] = me[d] * q + (me[d] < rem ? me[d] : rem);
    }
    p->disp = 4096 + 24;
    MPI_Type_create_subarray(2, G, sub, st, MPI_ORDER_C, MPI_DOUBLE, &p->ftype);
    MPI_Type_commit(&p->ftype);
    p->etype = MPI_DOUBLE;
    p->esize = 8;
    for (int i = 0; i < sub[0]; i++) {
        add_range(p, p->disp + ((int64_t)(st[0] + i) * G[1] + st[1]) * 8, (int64_t)sub[1] * 8);
    }
    p->file_size = p->disp + (int64_t)G[0] * G[1] * 8;
    p->halo = halo;
    p->rows = sub[0];
    p->cols = sub[1];
}

/* The memory buffer for `data` (the data stream) and its type and count. */
static void *mem_of(const struct pattern *p, const unsigned char *data, MPI_Datatype *type, int *count)
{
    if (!p->halo) {
        unsigned char *m = malloc((size_t)p->nbytes + 1);
        if (data) {
            memcpy(m, data, (size_t)p->nbytes);
        }
        *type = p->etype;
        *count = (int)(p->nbytes / p->esize);
        return m;
    }
    int full[2] = {p->rows + 2, p->cols + 2}, sub[2] = {p->rows, p->cols}, st[2] = {1, 1};
    MPI_Type_create_subarray(2, full, sub, st, MPI_ORDER_C, MPI_DOUBLE, type);
    MPI_Type_commit(type);
    *count = 1;
    size_t size = (size_t)full[0] * full[1] * 8;
    unsigned char *m = malloc(size);
    memset(m, 0xee, size);
    if (data) {
        for (int i = 0; i < p->rows; i++) {
            memcpy(m + ((size_t)(i + 1) * full[1] + 1) * 8, data + (size_t)i * p->cols * 8, (size_t)p->cols * 8);
        }
    }
    return m;
}

/* The data stream out of a memory buffer. */
static unsigned char *stream_of(const struct pattern *p, const unsigned char *m)
{
    unsigned char *d = malloc((size_t)p->nbytes + 1);
    if (!p->halo) {
        memcpy(d, m, (size_t)p->nbytes);
        return d;
    }
    int fc = p->cols + 2;
    for (int i = 0; i < p->rows; i++) {
        memcpy(d + (size_t)i * p->cols * 8, m + ((size_t)(i + 1) * fc + 1) * 8, (size_t)p->cols * 8);
    }
    return d;
}

static void compare(const struct pattern *p, const unsigned char *got, const unsigned char *want, const char *how)
{
    for (int64_t k = 0; k < p->nbytes; k++) {
        if (got[k] != want[k]) {
            int64_t r = 0, kk = k;
            while (kk >= p->rlen[r]) {
                kk -= p->rlen[r++];
            }
            FAIL("%s, %s: byte %lld of the data stream (file offset %lld) is %u, not %u", p->name, how, (long long)k,
                 (long long)(p->roff[r] + kk), got[k], want[k]);
        }
    }
}

static void set_view(MPI_File fh, const struct pattern *p)
{
    if (p->ftype != MPI_DATATYPE_NULL) {
        CHECK_MPI(MPI_File_set_view(fh, p->disp, p->etype, p->ftype, "native", MPI_INFO_NULL));
    }
}

static MPI_File open_file(const char *path, int amode)
{
    MPI_Info info;
    MPI_Info_create(&info);
    char v[32];
    snprintf(v, sizeof(v), "%d", stripe_count);
    MPI_Info_set(info, "striping_factor", v);
    snprintf(v, sizeof(v), "%d", stripe_size);
    MPI_Info_set(info, "striping_unit", v);
    MPI_File fh;
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, path, amode, info, &fh));
    MPI_Info_free(&info);
    if (expect_layer) {
        MPI_Info used;
        CHECK_MPI(MPI_File_get_info(fh, &used));
        char got[256];
        int flag = 0;
        MPI_Info_get(used, "weft_collective", sizeof(got) - 1, got, &flag);
        if (!flag || strcmp(got, "enable") != 0) {
            FAIL("%s: the Weft layer did not take the file (weft_collective %s)", path, flag ? got : "absent");
        }
        MPI_Info_get(used, "striping_factor", sizeof(got) - 1, got, &flag);
        if (!flag || atoi(got) != stripe_count) {
            FAIL("%s: striping_factor %s, asked %d", path, flag ? got : "absent", stripe_count);
        }
        MPI_Info_get(used, "striping_unit", sizeof(got) - 1, got, &flag);
        if (!flag || atoi(got) != stripe_size) {
            FAIL("%s: striping_unit %s, asked %d", path, flag ? got : "absent", stripe_size);
        }
        /* the choices the environment asked, as get_info reports them */
        const char *keys[][2] = {{"weft_placement", "WEFT_MPIIO_PLACEMENT"},
                                 {"weft_exchange", "WEFT_MPIIO_EXCHANGE"},
                                 {"weft_io", "WEFT_MPIIO_IO"}};
        for (int k = 0; k < 3; k++) {
            const char *want = getenv(keys[k][1]);
            MPI_Info_get(used, keys[k][0], sizeof(got) - 1, got, &flag);
            if (!flag || (want && *want && strcmp(got, want) != 0)) {
                FAIL("%s: %s %s, asked %s", path, keys[k][0], flag ? got : "absent", want ? want : "(default)");
            }
        }
        MPI_Info_free(&used);
    }
    return fh;
}

/* Writes the pattern (collectively or not) in two calls where the memory allows it. */
static void write_pattern(MPI_File fh, const struct pattern *p, const unsigned char *data, int collective)
{
    MPI_Datatype mt;
    int count;
    void *m = mem_of(p, data, &mt, &count);
    set_view(fh, p);
    MPI_Status st;
    int last = count;
    if (p->ftype == MPI_DATATYPE_NULL) {
        int half = count / 2;
        if (collective) {
            CHECK_MPI(MPI_File_write_at_all(fh, p->start, m, half, mt, &st));
            CHECK_MPI(MPI_File_write_at_all(fh, p->start + half, (char *)m + half, count - half, mt, &st));
            last = count - half;
        } else {
            CHECK_MPI(MPI_File_write_at(fh, p->start, m, count, mt, &st));
        }
    } else if (!p->halo) {
        int half = count / 2;
        last = count - half;
        if (collective) {
            /* through the individual file pointer, which must move past the first half */
            CHECK_MPI(MPI_File_write_all(fh, m, half, mt, &st));
            CHECK_MPI(MPI_File_write_all(fh, (char *)m + (size_t)half * p->esize, count - half, mt, &st));
        } else {
            CHECK_MPI(MPI_File_write(fh, m, half, mt, &st));
            CHECK_MPI(MPI_File_write_at(fh, half, (char *)m + (size_t)half * p->esize, count - half, mt, &st));
        }
    } else {
        if (collective) {
            CHECK_MPI(MPI_File_write_at_all(fh, 0, m, count, mt, &st));
        } else {
            CHECK_MPI(MPI_File_write_at(fh, 0, m, count, mt, &st));
        }
    }
    int n = -1;
    MPI_Get_count(&st, mt, &n);
    if (n != last) {
        FAIL("%s: the write's status counts %d, not %d", p->name, n, last);
    }
    if (p->halo) {
        MPI_Type_free(&mt);
    }
    free(m);
}

static void read_check(MPI_File fh, const struct pattern *p, const unsigned char *want, int collective)
{
    MPI_Datatype mt;
    int count;
    void *m = mem_of(p, NULL, &mt, &count);
    set_view(fh, p);
    MPI_Status st;
    MPI_Offset at = p->ftype == MPI_DATATYPE_NULL ? p->start : 0;
    if (collective) {
        CHECK_MPI(MPI_File_read_at_all(fh, at, m, count, mt, &st));
    } else {
        CHECK_MPI(MPI_File_read_at(fh, at, m, count, mt, &st));
    }
    unsigned char *got = stream_of(p, m);
    compare(p, got, want, collective ? "collective read" : "independent read");
    if (p->halo) {
        /* the halo is untouched */
        unsigned char *c = m;
        for (int j = 0; j < p->cols + 2; j++) {
            if (c[j * 8] != 0xee) {
                FAIL("%s: the read wrote into the halo", p->name);
            }
        }
        MPI_Type_free(&mt);
    }
    free(got);
    free(m);
}

static void posix_check(const char *path, const struct pattern *p, const unsigned char *want)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        FAIL("open %s through the mount", path);
    }
    unsigned char *got = malloc((size_t)p->nbytes + 1);
    int64_t k = 0;
    for (int64_t r = 0; r < p->nr; r++) {
        int64_t done = 0;
        while (done < p->rlen[r]) {
            ssize_t n = pread(fd, got + k + done, (size_t)(p->rlen[r] - done), p->roff[r] + done);
            if (n <= 0) {
                FAIL("%s: pread at %lld through the mount: short", p->name, (long long)(p->roff[r] + done));
            }
            done += n;
        }
        k += done;
    }
    compare(p, got, want, "POSIX read through the mount");
    struct stat s;
    fstat(fd, &s);
    if (s.st_size != p->file_size) {
        FAIL("%s: the file holds %lld bytes, not %lld", p->name, (long long)s.st_size, (long long)p->file_size);
    }
    close(fd);
    free(got);
}

static void run(struct pattern *p, int collective_write, int round)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s-%s-c%d-s%d-n%d", dir, p->name, collective_write ? "cw" : "iw", stripe_count,
             stripe_size, nprocs);
    if (rank == 0) {
        unlink(path);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    unsigned char *want = stream(p, round);
    MPI_File fh = open_file(path, MPI_MODE_CREATE | MPI_MODE_RDWR);
    write_pattern(fh, p, want, collective_write);
    CHECK_MPI(MPI_File_sync(fh));
    /* the other way on the same handle */
    read_check(fh, p, want, !collective_write);
    CHECK_MPI(MPI_File_close(&fh));
    MPI_Barrier(MPI_COMM_WORLD);
    posix_check(path, p, want);
    /* both ways on a new handle, read-only */
    fh = open_file(path, MPI_MODE_RDONLY);
    read_check(fh, p, want, 1);
    read_check(fh, p, want, 0);
    CHECK_MPI(MPI_File_close(&fh));
    free(want);
    free(p->roff);
    free(p->rlen);
    if (rank == 0) {
        printf("%s %s: %d ranks, %d stripes of %d: checked\n", p->name,
               collective_write ? "collective write, independent read" : "independent write, collective read", nprocs,
               stripe_count, stripe_size);
        fflush(stdout);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc < 4) {
        if (rank == 0) {
            fprintf(stderr, "usage: %s DIR STRIPE_COUNT STRIPE_SIZE [SCALE]\n", argv[0]);
        }
        MPI_Finalize();
        return 2;
    }
    dir = argv[1];
    stripe_count = atoi(argv[2]);
    stripe_size = atoi(argv[3]);
    scale = argc > 4 ? atoi(argv[4]) : 4;
    const char *e = getenv("WEFT_EXPECT_LAYER");
    expect_layer = e && strcmp(e, "1") == 0;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    struct pattern p;
    int round = 0;
    for (int cw = 1; cw >= 0; cw--) {
        make_contiguous(&p);
        run(&p, cw, round++);
        make_vector(&p);
        run(&p, cw, round++);
        MPI_Type_free(&p.ftype);
        make_indexed(&p);
        run(&p, cw, round++);
        MPI_Type_free(&p.ftype);
        make_subarray(&p, 0);
        run(&p, cw, round++);
        MPI_Type_free(&p.ftype);
        make_subarray(&p, 1);
        run(&p, cw, round++);
        MPI_Type_free(&p.ftype);
    }
    if (rank == 0) {
        printf("all checks held\n");
    }
    MPI_Finalize();
    return 0;
}
