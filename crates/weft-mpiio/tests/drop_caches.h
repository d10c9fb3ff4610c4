/*
 * drop_caches.h: the benchmark programs' drop of the page cache (as root) between a write
 * and its read back, so that a read through the mount comes from the servers, as libweft's
 * (which has no cache) always does.
 */
#ifndef WEFT_BENCH_DROP_CACHES_H
#define WEFT_BENCH_DROP_CACHES_H
#include <stdio.h>
#include <unistd.h>

static inline void drop_page_cache(const char *program)
{
    sync();
    FILE *dc = fopen("/proc/sys/vm/drop_caches", "w");
    if (!dc || fputs("3", dc) < 0) {
        fprintf(stderr, "%s: cannot drop the page cache\n", program);
    }
    if (dc) {
        fclose(dc);
    }
}
#endif
