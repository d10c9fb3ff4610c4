/*
 * A simulation's checkpoint under a bandwidth reservation, through libweft's C API: reserve
 * a rate on the OSTs of the checkpoint directory, wait until it is active, write, give it
 * back. Usage: qos_test MGS_ADDRESS DIR RATE MIB
 * DIR (from the file system's root) exists; RATE is the reservation ("16M"); MIB the MiB
 * written to DIR/ckpt in 1 MiB writes. Prints "rate R" (MiB/s the write phase ran at) and
 * exits 0 when every check held, 1 at the first that did not.
 */
#define _GNU_SOURCE
#include "weft.h"
#include "check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s MGS_ADDRESS DIR RATE MIB\n", argv[0]);
        return 2;
    }
    const char *mgs = argv[1], *dir = argv[2], *rate = argv[3];
    long mib = atol(argv[4]);
    weft_fs *fs = NULL;
    CHECK(weft_mount(mgs, &fs) == 0, "mount");
    CHECK(weft_set_jobid(fs, "ckpt-c") == 0, "set the job id");
    const char *paths[] = {dir};

    /* Wrong input is refused with the reason. */
    int rc = weft_qos_reserve_async(fs, "c1", NULL, paths, 1, "fast", 10000);
    CHECK(rc == -EINVAL && strstr(weft_strerror(), "500rps"), "a bad throughput: %d", rc);
    rc = weft_qos_reserve_async(fs, "c1", NULL, paths, 1, "10G", 10000);
    CHECK(rc == -EINVAL && strstr(weft_strerror(), "free now"), "over the capacity: %d", rc);
    CHECK(weft_qos_test(fs, "c1") == WEFT_QOS_UNDEFINED, "nothing reserved yet");
    CHECK(weft_qos_remove(fs, "c1") == -ENOENT, "removing what is not there");

    /* Reserve before the write phase, and wait until it is active. */
    rc = weft_qos_reserve_sync(fs, "c1", NULL, paths, 1, rate, 60000, 30000);
    CHECK(rc == WEFT_QOS_ACTIVE, "reserve and wait: %d", rc);
    CHECK(weft_qos_test(fs, "c1") == WEFT_QOS_ACTIVE, "active");
    rc = weft_qos_reserve_async(fs, "c1", NULL, paths, 1, rate, 1000);
    CHECK(rc == -EEXIST, "the id in use: %d", rc);

    char path[512];
    snprintf(path, sizeof path, "%s/ckpt", dir);
    weft_file *f = NULL;
    CHECK(weft_open(fs, path, O_WRONLY | O_CREAT | O_TRUNC, 0644, &f) == 0, "create %s", path);
    static char buf[1 << 20];
    memset(buf, 0x5a, sizeof buf);
    double t0 = now();
    for (long i = 0; i < mib; i++) {
        CHECK(weft_pwrite(f, buf, sizeof buf, i * (long)sizeof buf) == (ssize_t)sizeof buf, "write %ld", i);
    }
    CHECK(weft_fsync(f) == 0, "fsync");
    double took = now() - t0;
    CHECK(weft_close(f) == 0, "close");
    printf("rate %.2f\n", (double)mib / took);

    /* Given back: done at once. */
    CHECK(weft_qos_remove(fs, "c1") == 0, "remove");
    CHECK(weft_qos_test(fs, "c1") == WEFT_QOS_DONE, "done");
    CHECK(weft_qos_remove(fs, "c1") == 0, "a second remove is no error");
    CHECK(weft_umount(fs) == 0, "umount");
    printf("all checks held\n");
    return 0;
}
