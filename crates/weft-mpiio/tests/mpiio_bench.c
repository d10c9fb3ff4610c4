/*
 * mpiio_bench: the access patterns of the layout-aware MPI-IO work on the K computer,
 * timed. Run it under the MPI library as is, or with LD_PRELOAD=libweft_mpiio.so for the
 * Weft layer (scripts/bench-mpiio.sh runs both, and the POSIX file-per-process ceiling).
 *
 *   mpirun -n P mpiio_bench PATTERN DIR MIB [stripe_count stripe_size]
 *
 * PATTERN:
 *   subarray  a 2-D array of doubles over a process grid, collective write then read
 *             (MPI_File_set_view of a subarray, MPI_File_write_all / read_all)
 *   hpio      HPIO's non-contiguous file pattern: regions of 5,992 B, 256 B apart, the
 *             ranks' regions interleaved; collective write then read
 *   contig    each rank one contiguous part, collective (write_at_all / read_at_all)
 *   icontig   the same with independent calls (write_at / read_at)
 *   indep     the hpio pattern with independent calls (MPI_File_write / read)
 *   fpp       POSIX, a file per process (pwrite of 4 MiB pieces, fsync; then pread)
 * MIB is the whole file's size in MiB (about). Prints one line:
 *   PATTERN write MB/s read MB/s
 * Times include open, sync and close (after an untimed open and close of another file). The data read is compared with what was written.
 * WEFT_BENCH_DROP_CACHES=1: rank 0 drops the page cache (as root) between the write and
 * the read, so that a read through the mount comes from the servers, as the layer's
 * (libweft has no cache) always does.
 * WEFT_BENCH_PHASES=1: each rank prints the seconds of each MPI-IO run's open, I/O call,
 * sync and close.
 */
#include <fcntl.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "drop_caches.h"

static int rank, nprocs;

static void die(const char *what)
{
    fprintf(stderr, "rank %d: %s\n", rank, what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc < 4) {
        if (rank == 0) {
            fprintf(stderr, "usage: mpiio_bench PATTERN DIR MIB [stripe_count stripe_size]\n");
        }
        MPI_Finalize();
        return 2;
    }
    const char *pattern = argv[1], *dir = argv[2];
    /* A DIR with %d names each rank's own mount of the same file system (as ranks on
     * separate nodes are separate clients): the rank goes in its place. */
    char rank_dir[2048];
    if (strstr(dir, "%d")) {
        snprintf(rank_dir, sizeof(rank_dir), "%.*s%d%s", (int)(strstr(dir, "%d") - dir), dir, rank,
                 strstr(dir, "%d") + 2);
        dir = rank_dir;
    }
    int64_t total = (int64_t)atoi(argv[3]) << 20;
    MPI_Info info;
    MPI_Info_create(&info);
    if (argc > 5) {
        MPI_Info_set(info, "striping_factor", argv[4]);
        MPI_Info_set(info, "striping_unit", argv[5]);
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/bench-%s", dir, pattern);
    MPI_Datatype ftype = MPI_DATATYPE_NULL, etype = MPI_BYTE;
    MPI_Offset disp = 0;
    int64_t mine = 0; /* bytes of this rank */
    int collective = 1;
    if (strcmp(pattern, "subarray") == 0) {
        int pr = 1, pc = nprocs;
        for (int d = 1; d * d <= nprocs; d++) {
            if (nprocs % d == 0) {
                pr = d;
                pc = nprocs / d;
            }
        }
        int n = 1;
        while ((int64_t)(n + 1) * (n + 1) * 8 <= total) {
            n++;
        }
        int G[2] = {n, n}, grid[2] = {pr, pc}, me[2] = {rank / pc, rank % pc}, sub[2], st[2];
        for (int d = 0; d < 2; d++) {
            int q = G[d] / grid[d], rem = G[d] % grid[d];
            sub[d] = q + (me[d] < rem);
            st[d] = me[d] * q + (me[d] < rem ? me[d] : rem);
        }
        MPI_Type_create_subarray(2, G, sub, st, MPI_ORDER_C, MPI_DOUBLE, &ftype);
        etype = MPI_DOUBLE;
        mine = (int64_t)sub[0] * sub[1] * 8;
    } else if (strcmp(pattern, "hpio") == 0 || strcmp(pattern, "indep") == 0) {
        const int region = 5992, space = 256;
        int count = (int)(total / nprocs / (region + space));
        MPI_Datatype v;
        MPI_Type_vector(count, region, (region + space) * nprocs, MPI_BYTE, &v);
        MPI_Type_create_resized(v, 0, (MPI_Aint)count * (region + space) * nprocs, &ftype);
        MPI_Type_free(&v);
        disp = (MPI_Offset)rank * (region + space);
        mine = (int64_t)count * region;
        collective = strcmp(pattern, "hpio") == 0;
    } else if (strcmp(pattern, "contig") == 0 || strcmp(pattern, "icontig") == 0 || strcmp(pattern, "fpp") == 0) {
        mine = total / nprocs;
        collective = strcmp(pattern, "icontig") != 0;
    } else {
        die("unknown pattern");
    }
    if (ftype != MPI_DATATYPE_NULL) {
        MPI_Type_commit(&ftype);
    }
    int esize;
    MPI_Type_size(etype, &esize);
    unsigned char *buf = malloc((size_t)mine), *back = malloc((size_t)mine);
    for (int64_t i = 0; i < mine; i++) {
        buf[i] = (unsigned char)(i * 13 + rank * 7 + 1);
    }
    /* An untimed open and close first: the first open of a process connects (the MPI
     * library's components, the layer's libweft mount). */
    if (strcmp(pattern, "fpp") != 0) {
        char warm[4200];
        snprintf(warm, sizeof(warm), "%s.warmup", path);
        MPI_File fh;
        if (MPI_File_open(MPI_COMM_WORLD, warm, MPI_MODE_CREATE | MPI_MODE_WRONLY | MPI_MODE_DELETE_ON_CLOSE, info,
                          &fh) == MPI_SUCCESS) {
            MPI_File_close(&fh);
        }
    }
    double tw = 0, tr = 0;
    const char *drop = getenv("WEFT_BENCH_DROP_CACHES");
    const char *phases_env = getenv("WEFT_BENCH_PHASES");
    int phases = phases_env && strcmp(phases_env, "1") == 0;
    for (int pass = 0; pass < 2; pass++) {
        int write = pass == 0;
        if (!write && drop && strcmp(drop, "1") == 0 && rank == 0) {
            /* the read from the servers, not from the page cache the mount's writes left */
            drop_page_cache("mpiio_bench");
        }
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (strcmp(pattern, "fpp") == 0) {
            char p[4200];
            snprintf(p, sizeof(p), "%s.%d", path, rank);
            int fd = open(p, write ? O_CREAT | O_TRUNC | O_WRONLY : O_RDONLY, 0644);
            if (fd < 0) {
                die("open");
            }
            for (int64_t o = 0; o < mine;) {
                size_t n = (size_t)(mine - o < (4 << 20) ? mine - o : (4 << 20));
                ssize_t r = write ? pwrite(fd, buf + o, n, o) : pread(fd, back + o, n, o);
                if (r <= 0) {
                    die("pwrite/pread");
                }
                o += r;
            }
            if (write) {
                fsync(fd);
            }
            close(fd);
        } else {
            MPI_File fh;
            double ph[4], p0 = MPI_Wtime();
            if (MPI_File_open(MPI_COMM_WORLD, path, write ? MPI_MODE_CREATE | MPI_MODE_WRONLY : MPI_MODE_RDONLY, info,
                              &fh) != MPI_SUCCESS) {
                die("MPI_File_open");
            }
            if (ftype != MPI_DATATYPE_NULL) {
                MPI_File_set_view(fh, disp, etype, ftype, "native", MPI_INFO_NULL);
            }
            ph[0] = MPI_Wtime() - p0;
            p0 = MPI_Wtime();
            int count = (int)(mine / esize);
            MPI_Offset at = ftype == MPI_DATATYPE_NULL ? (MPI_Offset)rank * mine : 0;
            int rc;
            if (write) {
                rc = collective ? MPI_File_write_at_all(fh, at, buf, count, etype, MPI_STATUS_IGNORE)
                                : MPI_File_write_at(fh, at, buf, count, etype, MPI_STATUS_IGNORE);
                ph[1] = MPI_Wtime() - p0;
                p0 = MPI_Wtime();
                MPI_File_sync(fh);
            } else {
                rc = collective ? MPI_File_read_at_all(fh, at, back, count, etype, MPI_STATUS_IGNORE)
                                : MPI_File_read_at(fh, at, back, count, etype, MPI_STATUS_IGNORE);
                ph[1] = MPI_Wtime() - p0;
            }
            ph[2] = MPI_Wtime() - p0;
            p0 = MPI_Wtime();
            if (rc != MPI_SUCCESS) {
                die("I/O call failed");
            }
            MPI_File_close(&fh);
            ph[3] = MPI_Wtime() - p0;
            if (phases) {
                fprintf(stderr, "rank %d %s: open %.3f s, %s %.3f, sync %.3f, close %.3f\n", rank,
                        write ? "write" : "read", ph[0], write ? "write" : "read", ph[1], write ? ph[2] : 0.0, ph[3]);
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
        double t = MPI_Wtime() - t0;
        if (write) {
            tw = t;
        } else {
            tr = t;
        }
    }
    if (memcmp(buf, back, (size_t)mine) != 0) {
        die("the data read back differs");
    }
    int64_t all = 0;
    MPI_Reduce(&mine, &all, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("%s write %.1f MB/s read %.1f MB/s (%lld bytes, %d ranks)\n", pattern, all / tw / 1e6, all / tr / 1e6,
               (long long)all, nprocs);
    }
    if (ftype != MPI_DATATYPE_NULL) {
        MPI_Type_free(&ftype);
    }
    free(buf);
    free(back);
    MPI_Info_free(&info);
    MPI_Finalize();
    return 0;
}
