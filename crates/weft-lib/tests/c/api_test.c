/*
 * Every call of libweft's C API against a running file system, as a C program uses it.
 * Usage: api_test MGS_ADDRESS DIR
 * DIR (from the file system's root) must not exist; the program leaves in it what
 * tests/libweft.rs then reads through a FUSE mount:
 *   DIR/striped   2 MiB of pattern(i), striped over OSTs 1 and 0, 1 MiB stripes
 *   DIR/renamed   "hello, weft\n"
 * and reads DIR/../from_fuse (written through the mount before): 100000 bytes of
 * pattern(i). Prints each step; exits 0 when every check held, 1 at the first that did not.
 */
#define _GNU_SOURCE
#include "weft.h"
#include "check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned char pattern(size_t i) { return (unsigned char)((i * 7 + 3) % 251); }

static char *at(const char *dir, const char *name) {
    static char buf[8][512];
    static int next;
    char *out = buf[next++ % 8];
    snprintf(out, sizeof buf[0], "%s/%s", dir, name);
    return out;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s MGS_ADDRESS DIR\n", argv[0]);
        return 2;
    }
    const char *mgs = argv[1], *dir = argv[2];
    weft_fs *fs = NULL;
    struct stat st;
    int rc;

    printf("version %s (header %s)\n", weft_version(), WEFT_VERSION);
    CHECK(strcmp(weft_version(), WEFT_VERSION) == 0, "library and header versions differ");

    /* A management service that is not there fails within seconds, saying what it tried. */
    rc = weft_mount("127.0.0.1:1", &fs);
    CHECK(rc < 0 && fs == NULL, "mount of nothing gave %d", rc);
    CHECK(strstr(weft_strerror(), "127.0.0.1:1") != NULL, "the message names the address: %s", weft_strerror());

    OK(weft_mount(mgs, &fs));
    OK(weft_set_jobid(fs, "capi.test"));
    rc = weft_set_umask(fs, 022);
    CHECK(rc >= 0, "set_umask gave %d", rc);

    OK(weft_mkdir(fs, dir, 0755));
    CHECK(weft_mkdir(fs, dir, 0755) == -EEXIST, "a second mkdir");

    /* A file striped over OSTs 1 and 0 with 1 MiB stripes. */
    weft_layout *layout = weft_layout_alloc();
    CHECK(layout != NULL, "layout_alloc");
    OK(weft_layout_stripe_size_set(layout, 1 << 20));
    CHECK(weft_layout_stripe_size_set(layout, 1000) == -EINVAL, "a stripe size not a multiple of 64 KiB");
    OK(weft_layout_ost_index_set(layout, 0, 1));
    OK(weft_layout_ost_index_set(layout, 1, 0));
    CHECK(weft_layout_ost_index_set(layout, 5, 0) == -EINVAL, "stripes out of order");
    int64_t count = 0;
    OK(weft_layout_stripe_count_get(layout, &count));
    CHECK(count == 2, "stripe count %lld", (long long)count);
    OK(weft_layout_pool_name_set(layout, NULL));
    char pool[32] = "x";
    OK(weft_layout_pool_name_get(layout, pool, sizeof pool));
    CHECK(pool[0] == 0, "no pool: '%s'", pool);

    weft_file *f = NULL;
    OK(weft_layout_file_create(fs, at(dir, "striped"), O_RDWR, 0644, layout, &f));
    weft_layout_free(layout);
    CHECK(weft_layout_file_create(fs, at(dir, "striped"), O_RDWR, 0644, weft_layout_alloc(), &f) == -EEXIST,
          "a second create with a layout");

    size_t len = 3 << 20;
    unsigned char *data = malloc(len), *back = malloc(len);
    for (size_t i = 0; i < len; i++) data[i] = pattern(i);
    /* The first MiB by write (the position moves), the rest by pwrite. */
    CHECK(weft_write(f, data, 1 << 20) == 1 << 20, "write");
    CHECK(weft_lseek(f, 0, SEEK_CUR) == 1 << 20, "the position after a write");
    CHECK(weft_pwrite(f, data + (1 << 20), len - (1 << 20), 1 << 20) == (ssize_t)(len - (1 << 20)), "pwrite");
    CHECK(weft_lseek(f, 0, SEEK_END) == (off_t)len, "SEEK_END");
    CHECK(weft_lseek(f, -1, SEEK_SET) == -EINVAL, "a negative position");
    OK(weft_fsync(f));
    OK(weft_fstat(f, &st));
    CHECK(st.st_size == (off_t)len && S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0644, "fstat: size %lld mode %o",
          (long long)st.st_size, st.st_mode);
    CHECK(st.st_blksize == 1 << 20, "st_blksize %ld is the stripe size", (long)st.st_blksize);
    CHECK(weft_lseek(f, 0, SEEK_SET) == 0, "rewind");
    memset(back, 0, len);
    CHECK(weft_read(f, back, len) == (ssize_t)len, "read all");
    CHECK(memcmp(back, data, len) == 0, "the bytes read are those written");
    CHECK(weft_read(f, back, 10) == 0, "read at the end");
    CHECK(weft_pread(f, back, 100, 2 << 20) == 100 && memcmp(back, data + (2 << 20), 100) == 0, "pread");

    weft_layout *got = NULL;
    OK(weft_layout_get_by_file(f, &got));
    uint64_t ost = 99, size = 0;
    OK(weft_layout_ost_index_get(got, 0, &ost));
    CHECK(ost == 1, "stripe 0 on OST %llu", (unsigned long long)ost);
    OK(weft_layout_ost_index_get(got, 1, &ost));
    CHECK(ost == 0, "stripe 1 on OST %llu", (unsigned long long)ost);
    CHECK(weft_layout_ost_index_get(got, 2, &ost) == -ENODATA, "no third stripe");
    OK(weft_layout_stripe_size_get(got, &size));
    CHECK(size == 1 << 20, "stripe size %llu", (unsigned long long)size);
    CHECK(weft_layout_comp_instantiated(got) == 1, "the file's component has objects");
    weft_layout_free(got);

    OK(weft_ftruncate(f, 2 << 20));
    OK(weft_fstat(f, &st));
    CHECK(st.st_size == 2 << 20, "size after ftruncate %lld", (long long)st.st_size);
    OK(weft_close(f));

    /* Read-only opens refuse writes; O_APPEND writes at the end. */
    OK(weft_open(fs, at(dir, "striped"), O_RDONLY, 0, &f));
    CHECK(weft_write(f, "x", 1) == -EBADF, "a write to a read-only open");
    OK(weft_close(f));
    OK(weft_open(fs, at(dir, "note"), O_WRONLY | O_CREAT | O_TRUNC, 0666, &f));
    CHECK(weft_write(f, "hello, ", 7) == 7, "write");
    OK(weft_close(f));
    OK(weft_open(fs, at(dir, "note"), O_WRONLY | O_APPEND, 0, &f));
    CHECK(weft_write(f, "weft\n", 5) == 5, "append");
    OK(weft_close(f));
    OK(weft_stat(fs, at(dir, "note"), &st));
    CHECK(st.st_size == 12 && (st.st_mode & 0777) == 0644, "size %lld, mode %o (umask 022)", (long long)st.st_size,
          st.st_mode & 0777);
    CHECK(weft_open(fs, at(dir, "missing"), O_RDONLY, 0, &f) == -ENOENT, "open of nothing");
    CHECK(strstr(weft_strerror(), "missing") != NULL, "the message names the path: %s", weft_strerror());
    CHECK(weft_open(fs, at(dir, "note"), O_RDONLY | O_DIRECTORY, 0, &f) == -ENOTDIR, "O_DIRECTORY of a file");

    /* What the mount wrote. */
    char from_fuse[512];
    snprintf(from_fuse, sizeof from_fuse, "%s/../from_fuse", dir);
    OK(weft_open(fs, from_fuse, O_RDONLY, 0, &f));
    ssize_t n = weft_read(f, back, len);
    CHECK(n == 100000, "read %zd bytes of from_fuse", n);
    for (size_t i = 0; i < 100000; i++) CHECK(back[i] == pattern(i), "from_fuse byte %zu", i);
    OK(weft_close(f));

    /* Names: links, renames, attributes. */
    OK(weft_symlink(fs, "note", at(dir, "link")));
    char target[64];
    n = weft_readlink(fs, at(dir, "link"), target, sizeof target);
    CHECK(n == 4 && memcmp(target, "note", 4) == 0, "readlink gave %zd", n);
    OK(weft_lstat(fs, at(dir, "link"), &st));
    CHECK(S_ISLNK(st.st_mode), "lstat of a link");
    OK(weft_stat(fs, at(dir, "link"), &st));
    CHECK(S_ISREG(st.st_mode) && st.st_size == 12, "stat through a link");
    CHECK(weft_readlink(fs, at(dir, "note"), target, sizeof target) == -EINVAL, "readlink of a file");
    OK(weft_link(fs, at(dir, "note"), at(dir, "hard")));
    OK(weft_stat(fs, at(dir, "hard"), &st));
    CHECK(st.st_nlink == 2, "nlink %lu", (unsigned long)st.st_nlink);
    struct stat st2;
    OK(weft_stat(fs, at(dir, "note"), &st2));
    CHECK(st.st_ino == st2.st_ino, "a hard link is the same inode");
    OK(weft_rename(fs, at(dir, "note"), at(dir, "renamed"), 0));
    CHECK(weft_stat(fs, at(dir, "note"), &st) == -ENOENT, "the old name is gone");
    CHECK(weft_rename(fs, at(dir, "hard"), at(dir, "renamed"), 1 /* RENAME_NOREPLACE */) == -EEXIST, "NOREPLACE");
    OK(weft_unlink(fs, at(dir, "hard")));
    OK(weft_chmod(fs, at(dir, "renamed"), 0600));
    OK(weft_chown(fs, at(dir, "renamed"), 1234, (gid_t)-1));
    struct timespec times[2] = {{1000000000, 5}, {1100000000, 7}};
    OK(weft_utimens(fs, at(dir, "renamed"), times));
    OK(weft_stat(fs, at(dir, "renamed"), &st));
    CHECK((st.st_mode & 0777) == 0600 && st.st_uid == 1234, "mode %o uid %u", st.st_mode & 0777, st.st_uid);
    CHECK(st.st_mtim.tv_sec == 1100000000 && st.st_mtim.tv_nsec == 7 && st.st_atim.tv_sec == 1000000000,
          "times %ld %ld", (long)st.st_atim.tv_sec, (long)st.st_mtim.tv_sec);
    OK(weft_access(fs, at(dir, "renamed"), R_OK | W_OK));
    OK(weft_access(fs, at(dir, "renamed"), F_OK));
    CHECK(weft_access(fs, at(dir, "absent"), F_OK) == -ENOENT, "access of nothing");
    OK(weft_open(fs, at(dir, "cut"), O_WRONLY | O_CREAT | O_EXCL, 0644, &f));
    OK(weft_close(f));
    OK(weft_truncate(fs, at(dir, "cut"), 5000));
    OK(weft_stat(fs, at(dir, "cut"), &st));
    CHECK(st.st_size == 5000, "size after truncate %lld", (long long)st.st_size);

    /* Extended attributes. */
    OK(weft_setxattr(fs, at(dir, "cut"), "user.color", "blue", 4, 0));
    CHECK(weft_setxattr(fs, at(dir, "cut"), "user.color", "red", 3, 1 /* XATTR_CREATE */) == -EEXIST, "XATTR_CREATE");
    CHECK(weft_getxattr(fs, at(dir, "cut"), "user.color", NULL, 0) == 4, "the value's length");
    char value[16] = {0};
    CHECK(weft_getxattr(fs, at(dir, "cut"), "user.color", value, sizeof value) == 4 && memcmp(value, "blue", 4) == 0,
          "getxattr");
    CHECK(weft_getxattr(fs, at(dir, "cut"), "user.color", value, 2) == -ERANGE, "a buffer too small");
    char names[256];
    n = weft_listxattr(fs, at(dir, "cut"), names, sizeof names);
    CHECK(n > 0 && memmem(names, n, "user.color", 11) != NULL, "listxattr");
    OK(weft_removexattr(fs, at(dir, "cut"), "user.color"));
    CHECK(weft_getxattr(fs, at(dir, "cut"), "user.color", value, sizeof value) == -ENODATA, "removed");

    /* A composite layout as a directory's default. */
    layout = weft_layout_alloc();
    OK(weft_layout_comp_extent_set(layout, 0, 1 << 20));
    OK(weft_layout_stripe_count_set(layout, 1));
    CHECK(weft_layout_comp_add(weft_layout_alloc()) == -EINVAL, "add after a component to the end of the file");
    OK(weft_layout_comp_add(layout));
    OK(weft_layout_stripe_count_set(layout, -1));
    uint32_t comps = 0;
    OK(weft_layout_comp_count(layout, &comps));
    CHECK(comps == 2, "%u components", comps);
    uint64_t start, end;
    OK(weft_layout_comp_use(layout, WEFT_LAYOUT_COMP_USE_FIRST));
    CHECK(weft_layout_comp_use(layout, WEFT_LAYOUT_COMP_USE_PREV) == -ENOENT, "before the first");
    OK(weft_layout_comp_use(layout, WEFT_LAYOUT_COMP_USE_NEXT));
    OK(weft_layout_comp_extent_get(layout, &start, &end));
    CHECK(start == 1 << 20 && end == WEFT_LAYOUT_EOF, "second extent [%llu, %llu)", (unsigned long long)start,
          (unsigned long long)end);
    OK(weft_layout_comp_use(layout, WEFT_LAYOUT_COMP_USE_LAST));
    CHECK(weft_layout_comp_use(layout, 77) == -EINVAL, "a bad choice");
    OK(weft_mkdir(fs, at(dir, "pfl"), 0755));
    OK(weft_layout_set(fs, at(dir, "pfl"), layout));
    weft_layout_free(layout);
    OK(weft_open(fs, at(dir, "pfl/file"), O_WRONLY | O_CREAT, 0644, &f));
    OK(weft_close(f));
    OK(weft_layout_get_by_path(fs, at(dir, "pfl/file"), &got));
    OK(weft_layout_comp_count(got, &comps));
    CHECK(comps == 2, "the file took the directory's two components (%u)", comps);
    OK(weft_layout_stripe_count_get(got, &count));
    CHECK(count == 1, "first component's stripe count %lld", (long long)count);
    weft_layout_free(got);

    /* Listings. */
    weft_dir *d = NULL;
    weft_dirent e;
    int seen = 0, dots = 0, striped = 0;
    OK(weft_opendir(fs, dir, &d));
    while ((rc = weft_readdir(d, &e)) == 1) {
        seen++;
        dots += strcmp(e.d_name, ".") == 0 || strcmp(e.d_name, "..") == 0;
        if (strcmp(e.d_name, "striped") == 0) striped = e.d_type == DT_REG;
    }
    CHECK(rc == 0, "readdir ended with %d", rc);
    /* ., .., striped, renamed, link, cut, pfl */
    CHECK(seen == 7 && dots == 2 && striped, "%d entries, %d dots", seen, dots);
    OK(weft_rewinddir(d));
    CHECK(weft_readdir(d, &e) == 1 && strcmp(e.d_name, ".") == 0, "after rewind");
    OK(weft_closedir(d));
    CHECK(weft_opendir(fs, at(dir, "cut"), &d) == -ENOTDIR, "opendir of a file");

    struct statvfs sv;
    OK(weft_statfs(fs, &sv));
    CHECK(sv.f_blocks > 0 && sv.f_bsize > 0 && sv.f_files > 0, "statfs");

    /* HSM: a request is queued (no copytool runs here), then cancelled. */
    weft_hsm_state hs = {99, 99};
    OK(weft_hsm_state_get(fs, at(dir, "cut"), &hs));
    CHECK(hs.states == 0, "a new file's HSM state %#x", hs.states);
    const char *files[] = {at(dir, "cut")};
    OK(weft_hsm_request(fs, files, 1, WEFT_HSM_ARCHIVE, 1));
    OK(weft_hsm_request(fs, files, 1, WEFT_HSM_CANCEL, 0));
    CHECK(weft_hsm_request(fs, files, 1, 42, 0) == -EINVAL, "a bad action");
    CHECK(weft_hsm_request(fs, files, 1, WEFT_HSM_RELEASE, 0) < 0, "release of a file never archived");

    CHECK(weft_rmdir(fs, dir) == -ENOTEMPTY, "rmdir of a full directory");
    OK(weft_unlink(fs, at(dir, "pfl/file")));
    OK(weft_rmdir(fs, at(dir, "pfl")));
    CHECK(weft_unlink(fs, NULL) == -EINVAL, "a NULL path");
    OK(weft_umount(fs));
    free(data);
    free(back);
    printf("all checks held\n");
    return 0;
}
