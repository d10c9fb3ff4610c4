/*
 * weft.h: the C API of libweft, a Weft file system's client library for programs,
 * without FUSE. Made by cbindgen from crates/weft-lib/src/ffi/ at build time: change the
 * Rust declarations, not this file.
 *
 * Link with `pkg-config --cflags --libs weft` (-lweft).
 *
 * Conventions:
 *  - Functions returning int give 0 (or a count) on success and a negative errno value
 *    on failure (-ENOENT, -EACCES...); those returning ssize_t or off_t give the count or
 *    offset, or a negative errno. weft_strerror() gives the last failure's message on the
 *    calling thread.
 *  - Paths are from the file system's root (a leading '/' or not); an absolute symbolic
 *    link is resolved from that root too.
 *  - Handles are opaque. Close every weft_file and weft_dir of a weft_fs before
 *    weft_umount. One handle may be used by several threads at once, except a weft_dir,
 *    a weft_layout, and weft_set_jobid.
 *  - Writes are on the OSTs when they return (there is no write-behind); reads and
 *    writes take the servers' extent locks, so other clients (FUSE mounts, other
 *    programs) see what was written as soon as the call returned.
 */

#ifndef WEFT_H
#define WEFT_H

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>

/* The version of libweft this header came with (weft_version() gives the library's). */
#define WEFT_VERSION_MAJOR 0
#define WEFT_VERSION_MINOR 1
#define WEFT_VERSION_PATCH 0
#define WEFT_VERSION "0.1.0"

/**
 * Longest name an entry holds, without its NUL.
 */
#define WEFT_NAME_MAX 255

/**
 * The file has a copy in the archive (maybe not up to date).
 */
#define WEFT_HS_EXISTS 1

/**
 * The file changed since it was archived.
 */
#define WEFT_HS_DIRTY 2

/**
 * Its data is only in the archive.
 */
#define WEFT_HS_RELEASED 4

/**
 * The archive's copy is up to date.
 */
#define WEFT_HS_ARCHIVED 8

/**
 * Never released.
 */
#define WEFT_HS_NORELEASE 16

/**
 * Never archived.
 */
#define WEFT_HS_NOARCHIVE 32

/**
 * The archive's copy is lost.
 */
#define WEFT_HS_LOST 64

/**
 * The end of an extent that runs to the end of the file.
 */
#define WEFT_LAYOUT_EOF UINT64_MAX

/**
 * No reservation of that id is known.
 */
#define WEFT_QOS_UNDEFINED 0

/**
 * Planned, not started yet.
 */
#define WEFT_QOS_SCHEDULED 1

/**
 * Its throughput is the job's now.
 */
#define WEFT_QOS_ACTIVE 2

/**
 * Over, or cancelled.
 */
#define WEFT_QOS_DONE 3

/**
 * What `weft_hsm_request` asks.
 */
typedef enum weft_hsm_action {
  /**
   * Copy the files' data to the archive.
   */
  WEFT_HSM_ARCHIVE = 1,
  /**
   * Free the objects of archived, clean, closed files (at once).
   */
  WEFT_HSM_RELEASE = 2,
  /**
   * Copy the archive's copy back.
   */
  WEFT_HSM_RESTORE = 3,
  /**
   * Delete the archive's copy.
   */
  WEFT_HSM_REMOVE = 4,
  /**
   * Stop the actions waiting or running on the files.
   */
  WEFT_HSM_CANCEL = 5,
} weft_hsm_action;

/**
 * Which component `weft_layout_comp_use` makes current.
 */
typedef enum weft_layout_comp_which {
  WEFT_LAYOUT_COMP_USE_FIRST = 1,
  WEFT_LAYOUT_COMP_USE_LAST = 2,
  WEFT_LAYOUT_COMP_USE_NEXT = 3,
  WEFT_LAYOUT_COMP_USE_PREV = 4,
} weft_layout_comp_which;

/**
 * A directory being listed.
 */
typedef struct weft_dir weft_dir;

/**
 * An open file or directory.
 */
typedef struct weft_file weft_file;

/**
 * A mounted file system.
 */
typedef struct weft_fs weft_fs;

/**
 * A layout being read or made.
 */
typedef struct weft_layout weft_layout;

/**
 * One entry of a listing.
 */
typedef struct weft_dirent {
  /**
   * The inode number stat gives.
   */
  uint64_t d_ino;
  /**
   * DT_REG, DT_DIR, DT_LNK, DT_FIFO, DT_CHR, DT_BLK or DT_SOCK.
   */
  uint8_t d_type;
  /**
   * The name, NUL-terminated.
   */
  char d_name[256];
} weft_dirent;

/**
 * A file's HSM state.
 */
typedef struct weft_hsm_state {
  /**
   * WEFT_HS_* flags.
   */
  uint32_t states;
  uint32_t archive_id;
} weft_hsm_state;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

/**
 * Opens directory `path` for listing: `*dir` is its handle.
 *
 * # Safety
 * `fs` is a mounted handle, `path` a NUL-terminated string, `dir` a writable pointer.
 */
int weft_opendir(const struct weft_fs *fs, const char *path, struct weft_dir **dir);

/**
 * The next entry into `*entry` (`.` and `..` first): 1, or 0 at the end.
 *
 * # Safety
 * `dir` is an open listing, `entry` a writable struct weft_dirent.
 */
int weft_readdir(struct weft_dir *dir, struct weft_dirent *entry);

/**
 * Starts the listing again from its first entry.
 *
 * # Safety
 * `dir` is an open listing.
 */
int weft_rewinddir(struct weft_dir *dir);

/**
 * Ends a listing and frees its handle.
 *
 * # Safety
 * `dir` is an open listing, not closed before.
 */
int weft_closedir(struct weft_dir *dir);

/**
 * Opens (or with O_CREAT makes, `mode` applied with the mount's umask) the file `path`
 * names from the file system's root: `*file` is its handle. Flags as open(2): O_RDONLY,
 * O_WRONLY, O_RDWR, O_CREAT, O_EXCL, O_TRUNC, O_APPEND, O_DIRECTORY, O_NOFOLLOW. A
 * directory opens read-only (for `weft_fstat`). A special file fails with -ENXIO.
 *
 * # Safety
 * `fs` is a mounted handle, `path` a NUL-terminated string, `file` a writable pointer.
 */
int weft_open(const struct weft_fs *fs,
              const char *path,
              int flags,
              mode_t mode,
              struct weft_file **file);

/**
 * Closes an open file and frees its handle; a writer's close tells the MDS the size its
 * objects hold. The handle is freed even when the close fails.
 *
 * # Safety
 * `file` is a handle an open gave, not closed before.
 */
int weft_close(struct weft_file *file);

/**
 * Reads up to `count` bytes at the file position, which moves past them; 0 at the end.
 *
 * # Safety
 * `file` is an open handle; `buf` holds `count` writable bytes.
 */
ssize_t weft_read(const struct weft_file *file, void *buf, size_t count);

/**
 * Writes `count` bytes at the file position (at the end with O_APPEND), which moves past
 * them; they are on the OSTs when it returns.
 *
 * # Safety
 * `file` is an open handle; `buf` holds `count` readable bytes.
 */
ssize_t weft_write(const struct weft_file *file, const void *buf, size_t count);

/**
 * Reads up to `count` bytes at `offset`; the file position stays.
 *
 * # Safety
 * `file` is an open handle; `buf` holds `count` writable bytes.
 */
ssize_t weft_pread(const struct weft_file *file, void *buf, size_t count, off_t off);

/**
 * Writes `count` bytes at `offset`; the file position stays.
 *
 * # Safety
 * `file` is an open handle; `buf` holds `count` readable bytes.
 */
ssize_t weft_pwrite(const struct weft_file *file, const void *buf, size_t count, off_t off);

/**
 * Moves the file position (SEEK_SET, SEEK_CUR, SEEK_END, SEEK_DATA, SEEK_HOLE); the new one.
 *
 * # Safety
 * `file` is an open handle.
 */
off_t weft_lseek(const struct weft_file *file, off_t off, int whence);

/**
 * Makes what this file's writes put on the OSTs durable there.
 *
 * # Safety
 * `file` is an open handle.
 */
int weft_fsync(const struct weft_file *file);

/**
 * The attributes of an open file, as fstat(2).
 *
 * # Safety
 * `file` is an open handle; `st` points to a writable struct stat.
 */
int weft_fstat(const struct weft_file *file, struct stat *st);

/**
 * Cuts or extends (with a hole) a file open for writing to `length` bytes.
 *
 * # Safety
 * `file` is an open handle.
 */
int weft_ftruncate(const struct weft_file *file, off_t length);

/**
 * Asks `action` (a `weft_hsm_action`) for the `count` files of `paths` (archive `archive_id`; 0: the file's or
 * the default archive). Archive, restore, remove and cancel are queued for the copytools.
 *
 * # Safety
 * `fs` is a mounted handle, `paths` `count` NUL-terminated strings.
 */
int weft_hsm_request(const struct weft_fs *fs,
                     const char *const *paths,
                     size_t count,
                     int action,
                     uint32_t archive_id);

/**
 * The HSM state of the file `path` names.
 *
 * # Safety
 * `fs` is a mounted handle, `path` a NUL-terminated string, `state` writable.
 */
int weft_hsm_state_get(const struct weft_fs *fs, const char *path, struct weft_hsm_state *state);

/**
 * A new layout: one component over the whole file, every value the file system's default.
 * Never NULL; free it with `weft_layout_free`.
 */
struct weft_layout *weft_layout_alloc(void);

/**
 * Frees a layout.
 *
 * # Safety
 * `layout` is NULL or a layout handle not freed before.
 */
void weft_layout_free(struct weft_layout *layout);

/**
 * The layout of the file `path` names (its OSTs as placed), or a directory's default:
 * `*layout` is a new handle, its first component current.
 *
 * # Safety
 * `fs` is a mounted handle, `path` a NUL-terminated string, `layout` a writable pointer.
 */
int weft_layout_get_by_path(const struct weft_fs *fs,
                            const char *path,
                            struct weft_layout **layout);

/**
 * The layout of an open file.
 *
 * # Safety
 * `file` is an open handle, `layout` a writable pointer.
 */
int weft_layout_get_by_file(const struct weft_file *file, struct weft_layout **layout);

/**
 * Makes the file `path` (O_CREAT|O_EXCL with `flags`, `mode` with the umask) with
 * `layout`, and opens it: `*file` is its handle (`llapi_layout_file_create`).
 *
 * # Safety
 * `fs` is a mounted handle, `path` a NUL-terminated string, `layout` a live layout,
 * `file` a writable pointer.
 */
int weft_layout_file_create(const struct weft_fs *fs,
                            const char *path,
                            int flags,
                            mode_t mode,
                            const struct weft_layout *layout,
                            struct weft_file **file);

/**
 * Gives `layout` to directory `path` as the default of the files made in it (`lfs
 * setstripe DIR`), or to an empty file that has no objects yet.
 *
 * # Safety
 * `fs` is a mounted handle, `path` a NUL-terminated string, `layout` a live layout.
 */
int weft_layout_set(const struct weft_fs *fs, const char *path, const struct weft_layout *layout);

/**
 * The current component's stripe count: 0 the default, -1 every OST.
 *
 * # Safety
 * `layout` is a live layout, `count` writable.
 */
int weft_layout_stripe_count_get(const struct weft_layout *layout, int64_t *count);

/**
 * Sets the current component's stripe count: 0 the default, -1 every OST.
 *
 * # Safety
 * `layout` is a live layout no other thread uses.
 */
int weft_layout_stripe_count_set(struct weft_layout *layout, int64_t count);

/**
 * The current component's stripe size in bytes (0: the default).
 *
 * # Safety
 * `layout` is a live layout, `size` writable.
 */
int weft_layout_stripe_size_get(const struct weft_layout *layout, uint64_t *size);

/**
 * Sets the current component's stripe size: 0 the default, else a multiple of 64 KiB.
 *
 * # Safety
 * `layout` is a live layout no other thread uses.
 */
int weft_layout_stripe_size_set(struct weft_layout *layout, uint64_t size);

/**
 * The current component's pool into `name` (`size` bytes, NUL-terminated); empty when
 * it has none. Its length.
 *
 * # Safety
 * `layout` is a live layout, `name` `size` writable bytes.
 */
int weft_layout_pool_name_get(const struct weft_layout *layout, char *name, size_t size);

/**
 * Sets the current component's pool; NULL or "" for none.
 *
 * # Safety
 * `layout` is a live layout no other thread uses, `name` NULL or a NUL-terminated string.
 */
int weft_layout_pool_name_set(struct weft_layout *layout, const char *name);

/**
 * The OST index of stripe `stripe` of the current component (as placed, or as asked);
 * -ENODATA when it has none there.
 *
 * # Safety
 * `layout` is a live layout, `index` writable.
 */
int weft_layout_ost_index_get(const struct weft_layout *layout, uint32_t stripe, uint64_t *index);

/**
 * Places stripe `stripe` of the current component on OST `index` (stripes in order from
 * 0: the next one, or one set before); the stripe count follows.
 *
 * # Safety
 * `layout` is a live layout no other thread uses.
 */
int weft_layout_ost_index_set(struct weft_layout *layout, uint32_t stripe, uint64_t index);

/**
 * How many components the layout has.
 *
 * # Safety
 * `layout` is a live layout, `count` writable.
 */
int weft_layout_comp_count(const struct weft_layout *layout, uint32_t *count);

/**
 * The current component's extent [start, end); end WEFT_LAYOUT_EOF: to the end of the file.
 *
 * # Safety
 * `layout` is a live layout, `start` and `end` writable.
 */
int weft_layout_comp_extent_get(const struct weft_layout *layout, uint64_t *start, uint64_t *end);

/**
 * Sets the current component's extent.
 *
 * # Safety
 * `layout` is a live layout no other thread uses.
 */
int weft_layout_comp_extent_set(struct weft_layout *layout, uint64_t start, uint64_t end);

/**
 * Adds a component after the last (which must end before the end of the file), from where
 * it ends to the end of the file, with its striping; current from now on.
 *
 * # Safety
 * `layout` is a live layout no other thread uses.
 */
int weft_layout_comp_add(struct weft_layout *layout);

/**
 * Makes another component current (`which`: a `weft_layout_comp_which`); -ENOENT past the first or the last.
 *
 * # Safety
 * `layout` is a live layout no other thread uses.
 */
int weft_layout_comp_use(struct weft_layout *layout,
                         int which);

/**
 * Whether the current component has objects (1) or not yet (0).
 *
 * # Safety
 * `layout` is a live layout.
 */
int weft_layout_comp_instantiated(const struct weft_layout *layout);

/**
 * libweft's version, as `MAJOR.MINOR.PATCH`.
 */
const char *weft_version(void);

/**
 * The message of the last call that failed on this thread (what was asked, and why it
 * failed); empty before any. Valid until this thread's next failure.
 */
const char *weft_strerror(void);

/**
 * Mounts the file system whose management service is at `mgs` ("host:port", or several
 * replicas' "a:p,b:p,c:p") as the calling process's user: `*fs` is its handle. Fails
 * within seconds when the service does not answer (-ETIMEDOUT, -ECONNREFUSED...).
 *
 * # Safety
 * `mgs` is a NUL-terminated string; `fs` points to a writable pointer.
 */
int weft_mount(const char *mgs, struct weft_fs **fs);

/**
 * Unmounts: the client's locks go back to the servers and the handle is freed. Every file
 * and directory of it must be closed first.
 *
 * # Safety
 * `fs` is a handle `weft_mount` gave, not unmounted before.
 */
int weft_umount(struct weft_fs *fs);

/**
 * This client's `max_rpcs_in_flight` (Lustre's `osc.*.max_rpcs_in_flight`): the
 * permanent setting `weft set-param -P max_rpcs_in_flight=N` made for every client, else 8;
 * what the MPI-IO layer's aggregators keep in flight per OST by default.
 *
 * # Safety
 * `fs` is a mounted handle.
 */
int weft_max_rpcs_in_flight(const struct weft_fs *fs);

/**
 * The job the requests of this mount count under from now on (job statistics and TBF
 * rules); by default WEFT_JOBID or SLURM_JOB_ID of the environment, else `program.uid`.
 *
 * # Safety
 * `fs` is a mounted handle; `jobid` a NUL-terminated string. Not while other threads use
 * the same handle.
 */
int weft_set_jobid(struct weft_fs *fs, const char *jobid);

/**
 * The umask the creates of this mount apply from now on (the process's at mount); the
 * previous one.
 *
 * # Safety
 * `fs` is a mounted handle.
 */
int weft_set_umask(const struct weft_fs *fs, uint32_t mask);

/**
 * The attributes of what `path` names, its last link followed (stat(2)).
 *
 * # Safety
 * `fs` is a mounted handle, `path` a NUL-terminated string, `st` a writable struct stat.
 */
int weft_stat(const struct weft_fs *fs, const char *path, struct stat *st);

/**
 * The attributes of what `path` names, a last link itself (lstat(2)).
 *
 * # Safety
 * As `weft_stat`.
 */
int weft_lstat(const struct weft_fs *fs, const char *path, struct stat *st);

/**
 * Makes directory `path` with `mode` (the umask applied).
 *
 * # Safety
 * `fs` is a mounted handle, `path` a NUL-terminated string.
 */
int weft_mkdir(const struct weft_fs *fs, const char *path, mode_t mode);

/**
 * Removes the empty directory `path`.
 *
 * # Safety
 * `fs` is a mounted handle, `path` a NUL-terminated string.
 */
int weft_rmdir(const struct weft_fs *fs, const char *path);

/**
 * Removes the name `path` (not a directory).
 *
 * # Safety
 * `fs` is a mounted handle, `path` a NUL-terminated string.
 */
int weft_unlink(const struct weft_fs *fs, const char *path);

/**
 * Renames `from` to `to`, replacing what `to` named (rename(2)); `flags` as renameat2(2):
 * 0, RENAME_NOREPLACE (1) or RENAME_EXCHANGE (2).
 *
 * # Safety
 * `fs` is a mounted handle, `from` and `to` NUL-terminated strings.
 */
int weft_rename(const struct weft_fs *fs, const char *from, const char *to, uint32_t flags);

/**
 * Makes `to` another name of the file `from` names (link(2)).
 *
 * # Safety
 * `fs` is a mounted handle, `from` and `to` NUL-terminated strings.
 */
int weft_link(const struct weft_fs *fs, const char *from, const char *to);

/**
 * Makes `path` a symbolic link to `target` (symlink(2); an absolute target is resolved
 * from the file system's root by this library).
 *
 * # Safety
 * `fs` is a mounted handle, `target` and `path` NUL-terminated strings.
 */
int weft_symlink(const struct weft_fs *fs, const char *target, const char *path);

/**
 * The target of the symbolic link `path` into `buf` (not NUL-terminated, as readlink(2));
 * its length. A target longer than `size` is cut to it.
 *
 * # Safety
 * `fs` is a mounted handle, `path` a NUL-terminated string, `buf` `size` writable bytes.
 */
ssize_t weft_readlink(const struct weft_fs *fs, const char *path, char *buf, size_t size);

/**
 * Sets the permission bits (chmod(2)).
 *
 * # Safety
 * `fs` is a mounted handle, `path` a NUL-terminated string.
 */
int weft_chmod(const struct weft_fs *fs, const char *path, mode_t mode);

/**
 * Sets the owner and group (chown(2)); -1 (as `(uid_t)-1`) leaves one as it is.
 *
 * # Safety
 * `fs` is a mounted handle, `path` a NUL-terminated string.
 */
int weft_chown(const struct weft_fs *fs, const char *path, uid_t uid, gid_t gid);

/**
 * Sets the access and modification times (utimensat(2)'s `times`: NULL for now, or two
 * timespecs with UTIME_NOW and UTIME_OMIT allowed).
 *
 * # Safety
 * `fs` is a mounted handle, `path` a NUL-terminated string, `times` NULL or two timespecs.
 */
int weft_utimens(const struct weft_fs *fs, const char *path, const struct timespec *times);

/**
 * Cuts or extends (with a hole) the file `path` names to `length` bytes.
 *
 * # Safety
 * `fs` is a mounted handle, `path` a NUL-terminated string.
 */
int weft_truncate(const struct weft_fs *fs, const char *path, off_t length);

/**
 * Whether this process may read (R_OK), write (W_OK), execute (X_OK) what `path` names,
 * or whether it is there (F_OK), by its mode bits (access(2)).
 *
 * # Safety
 * `fs` is a mounted handle, `path` a NUL-terminated string.
 */
int weft_access(const struct weft_fs *fs, const char *path, int mode);

/**
 * Space over the OSTs and inodes over the MDTs (statvfs(3)).
 *
 * # Safety
 * `fs` is a mounted handle, `buf` a writable struct statvfs.
 */
int weft_statfs(const struct weft_fs *fs, struct statvfs *buf);

/**
 * Plans reservation `id` of `throughput` ("100M" bytes per second, "500rps" requests per
 * second, for the whole job, divided evenly over the OSTs) on the OSTs of the `count`
 * files or directories of `paths`, for `duration_ms`, for the requests of job `job`
 * (NULL: this handle's job id, `weft_set_jobid`). Returns its state at once
 * (WEFT_QOS_SCHEDULED or WEFT_QOS_ACTIVE; `weft_qos_test` follows it), or a negative errno:
 * -EINVAL (over an OST's capacity, the free capacity named in `weft_strerror`), -EEXIST (the
 * id is planned or active already), -EBUSY (an OST is down), -ENOSPC (too many reservations,
 * the caller's or the file system's), -ENOENT (a path or an OST that is not there), -EPERM
 * (an id of the Slurm prolog's, `slurm-...`). "Active" is the plan's word: the servers hold
 * the rate from when they learn the plan, within moments.
 *
 * # Safety
 * `fs` is a mounted handle; `id` and `throughput` are strings, `job` NULL or a string,
 * `paths` `count` strings.
 */
int weft_qos_reserve_async(const struct weft_fs *fs,
                           const char *id,
                           const char *job,
                           const char *const *paths,
                           size_t count,
                           const char *throughput,
                           uint64_t duration_ms);

/**
 * As `weft_qos_reserve_async`, then waits until the reservation is active (at most
 * `timeout_ms`: -ETIMEDOUT, the reservation staying planned; -ECANCELED if it was cancelled
 * first). Returns WEFT_QOS_ACTIVE.
 *
 * # Safety
 * As `weft_qos_reserve_async`.
 */
int weft_qos_reserve_sync(const struct weft_fs *fs,
                          const char *id,
                          const char *job,
                          const char *const *paths,
                          size_t count,
                          const char *throughput,
                          uint64_t duration_ms,
                          uint64_t timeout_ms);

/**
 * The state of reservation `id` now: WEFT_QOS_UNDEFINED, _SCHEDULED, _ACTIVE or _DONE; or a
 * negative errno (the management service did not answer).
 *
 * # Safety
 * `fs` is a mounted handle, `id` a string.
 */
int weft_qos_test(const struct weft_fs *fs, const char *id);

/**
 * Ends reservation `id` now, giving its bandwidth back (its maker or root; one already done
 * is no error). 0, or a negative errno (-ENOENT: no such reservation; -EPERM).
 *
 * # Safety
 * `fs` is a mounted handle, `id` a string.
 */
int weft_qos_remove(const struct weft_fs *fs, const char *id);

/**
 * The value of attribute `name` into `value` (`size` bytes); its length. With `size` 0,
 * only the length. -ENODATA when there is none, -ERANGE when it does not fit.
 *
 * # Safety
 * `fs` is a mounted handle, `path` and `name` NUL-terminated strings, `value` `size`
 * writable bytes.
 */
ssize_t weft_getxattr(const struct weft_fs *fs,
                      const char *path,
                      const char *name,
                      void *value,
                      size_t size);

/**
 * Sets attribute `name` to the `size` bytes of `value`; `flags` 0, XATTR_CREATE (1) or
 * XATTR_REPLACE (2).
 *
 * # Safety
 * `fs` is a mounted handle, `path` and `name` NUL-terminated strings, `value` `size`
 * readable bytes.
 */
int weft_setxattr(const struct weft_fs *fs,
                  const char *path,
                  const char *name,
                  const void *value,
                  size_t size,
                  int flags);

/**
 * The names of the attributes, each NUL-terminated, one after another, into `list`
 * (`size` bytes); their length. With `size` 0, only the length.
 *
 * # Safety
 * `fs` is a mounted handle, `path` a NUL-terminated string, `list` `size` writable bytes.
 */
ssize_t weft_listxattr(const struct weft_fs *fs, const char *path, char *list, size_t size);

/**
 * Removes attribute `name`; -ENODATA when there is none.
 *
 * # Safety
 * `fs` is a mounted handle, `path` and `name` NUL-terminated strings.
 */
int weft_removexattr(const struct weft_fs *fs, const char *path, const char *name);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* WEFT_H */
