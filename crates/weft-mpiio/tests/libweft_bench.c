/*
 * libweft_bench: what one process gets from libweft's weft_pwrite / weft_pread alone, the
 * calls an MPI-IO aggregator makes, against pwrite / pread of the same bytes on the FUSE
 * mount: to tell the layer's own costs from libweft's (docs/BENCHMARKS.md, MPI-IO).
 *
 *   libweft_bench MGS INNER_PATH MOUNTED_PATH MIB CALL_KIB THREADS
 *
 * Writes MIB MiB in calls of CALL_KIB KiB from THREADS threads (thread i takes calls i,
 * i+THREADS, ...), fsync, then reads them back; first through libweft (INNER_PATH in the
 * file system MGS names), then through the mount (MOUNTED_PATH), each file made anew in
 * the directory's layout. Prints per path: write and read MB/s and the mean and longest
 * call in ms. LIBWEFT_BENCH_ONLY=libweft (or mount) runs that path alone (for perf);
 * LIBWEFT_BENCH_DROP_CACHES=1 drops the page cache (as root) between write and read.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <weft.h>

#include "drop_caches.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct job {
    weft_file *wf;
    int fd;
    int write, id, nthreads;
    int64_t calls, call;
    char *buf;
    double sum, max;
};

static void *worker(void *arg)
{
    struct job *j = arg;
    for (int64_t c = j->id; c < j->calls; c += j->nthreads) {
        char *b = j->buf + c * j->call;
        int64_t off = c * j->call;
        double t0 = now();
        ssize_t n;
        if (j->wf) {
            n = j->write ? weft_pwrite(j->wf, b, (size_t)j->call, off) : weft_pread(j->wf, b, (size_t)j->call, off);
        } else {
            n = j->write ? pwrite(j->fd, b, (size_t)j->call, off) : pread(j->fd, b, (size_t)j->call, off);
        }
        double dt = now() - t0;
        if (n != j->call) {
            fprintf(stderr, "call at %lld: %zd\n", (long long)off, n);
            exit(1);
        }
        j->sum += dt;
        j->max = dt > j->max ? dt : j->max;
    }
    return NULL;
}

/* One pass; MB/s, and the mean and longest call. */
static double pass(weft_file *wf, int fd, int write, char *buf, int64_t calls, int64_t call, int nt, double *mean,
                   double *max)
{
    struct job *j = calloc((size_t)nt, sizeof(*j));
    pthread_t *th = calloc((size_t)nt, sizeof(*th));
    double t0 = now();
    for (int i = 0; i < nt; i++) {
        j[i] = (struct job){wf, fd, write, i, nt, calls, call, buf, 0, 0};
        pthread_create(&th[i], NULL, worker, &j[i]);
    }
    double sum = 0;
    *max = 0;
    for (int i = 0; i < nt; i++) {
        pthread_join(th[i], NULL);
        sum += j[i].sum;
        *max = j[i].max > *max ? j[i].max : *max;
    }
    if (write) {
        if (wf) {
            weft_fsync(wf);
        } else {
            fsync(fd);
        }
    }
    double t = now() - t0;
    *mean = sum / (double)calls;
    free(j);
    free(th);
    return (double)(calls * call) / t / 1e6;
}

int main(int argc, char **argv)
{
    if (argc < 7) {
        fprintf(stderr, "usage: libweft_bench MGS INNER_PATH MOUNTED_PATH MIB CALL_KIB THREADS\n");
        return 2;
    }
    int64_t total = (int64_t)atoi(argv[4]) << 20, call = (int64_t)atoi(argv[5]) << 10;
    int nt = atoi(argv[6]);
    int64_t calls = total / call;
    char *buf = malloc((size_t)total), *back = malloc((size_t)total);
    for (int64_t i = 0; i < total; i++) {
        buf[i] = (char)(i * 7 + 3);
    }
    memset(back, 0, (size_t)total);
    weft_fs *fs = NULL;
    if (weft_mount(argv[1], &fs) < 0) {
        fprintf(stderr, "weft_mount: %s\n", weft_strerror());
        return 1;
    }
    const char *only = getenv("LIBWEFT_BENCH_ONLY"); /* "libweft" or "mount": that path alone */
    const char *dropv = getenv("LIBWEFT_BENCH_DROP_CACHES");
    int drop = dropv && strcmp(dropv, "1") == 0;
    for (int path = 0; path < 2; path++) {
        if (only && strcmp(only, path == 0 ? "libweft" : "mount") != 0) {
            continue;
        }
        weft_file *wf = NULL;
        int fd = -1;
        if (path == 0) {
            if (weft_open(fs, argv[2], O_CREAT | O_TRUNC | O_RDWR, 0644, &wf) < 0) {
                fprintf(stderr, "weft_open: %s\n", weft_strerror());
                return 1;
            }
        } else {
            fd = open(argv[3], O_CREAT | O_TRUNC | O_RDWR, 0644);
        }
        double wm, wx, rm, rx;
        double w = pass(wf, fd, 1, buf, calls, call, nt, &wm, &wx);
        if (drop) {
            /* the mount's read from the servers, not from the cache its write left */
            drop_page_cache("libweft_bench");
        }
        double r = pass(wf, fd, 0, back, calls, call, nt, &rm, &rx);
        if (memcmp(buf, back, (size_t)total) != 0) {
            fprintf(stderr, "the data read back differs\n");
            return 1;
        }
        memset(back, 0, (size_t)total);
        printf("%s: %d threads, calls of %lld KiB: write %.1f MB/s (call %.2f ms mean, %.2f max), read %.1f MB/s "
               "(call %.2f ms mean, %.2f max)\n",
               path == 0 ? "libweft" : "mount  ", nt, (long long)(call >> 10), w, 1e3 * wm, 1e3 * wx, r, 1e3 * rm,
               1e3 * rx);
        if (wf) {
            weft_close(wf);
        } else {
            close(fd);
        }
    }
    weft_umount(fs);
    return 0;
}
