/* test_atomic_file.c — the one output-file writer (ir/atomic_file.c): a commit makes
 * the file appear whole and fsyncs the file before and its folder after the rename;
 * an abort and every failure (write error, full file size limit, fsync, rename, a
 * missing or unwritable folder, /dev/full) leave no temporary file and the old file as
 * it was, with OT_E_IO naming the path and the reason; a symlink planted at the
 * temporary name is never followed; and the writers built on it (.npy, checkpoint,
 * report) report a full disk the same way.
 *
 * fsync and getentropy are replaced below for this executable (a link-time seam: the
 * library's calls resolve to these definitions): fsync records what is synced, in
 * which order relative to the rename, and can be made to fail; getentropy can be
 * made to repeat a known temporary name. Both call the real system calls otherwise. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ir/atomic_file.h"
#include "train/checkpoint.h"
#include "train/npy.h"
#include "train/report.h"

#define TMP OT_BINARY_DIR "/test_atomic_file_tmp"

/* ---- the seams ------------------------------------------------------------------ */

typedef struct sync_call {
    bool is_dir;
    ino_t ino;      /* of what was synced */
    ino_t dest_ino; /* of the destination at that moment (0: absent) */
} sync_call;

static struct {
    const char *dest; /* the destination being watched */
    sync_call calls[16];
    int n_calls;
    int fail_file_errno, fail_dir_errno; /* make fsync of a file / a folder fail */
    bool fixed_name;                     /* getentropy repeats the same bytes */
} seam;

int fsync(int fd) {
    struct stat sb, db;
    if (fstat(fd, &sb) == 0 && seam.n_calls < 16) {
        sync_call *c = &seam.calls[seam.n_calls++];
        c->is_dir = S_ISDIR(sb.st_mode);
        c->ino = sb.st_ino;
        c->dest_ino = seam.dest && stat(seam.dest, &db) == 0 ? db.st_ino : 0;
        int fail = c->is_dir ? seam.fail_dir_errno : seam.fail_file_errno;
        if (fail) {
            errno = fail;
            return -1;
        }
    }
    return (int)syscall(SYS_fsync, fd);
}

int getentropy(void *buf, size_t n) {
    if (seam.fixed_name) {
        memset(buf, 7, n); /* always the same six letters */
        return 0;
    }
    return syscall(SYS_getrandom, buf, n, 0) == (long)n ? 0 : -1;
}

/* ---- helpers -------------------------------------------------------------------- */

static int setup(void **state) {
    (void)state;
    if (system("rm -rf '" TMP "' && mkdir -p '" TMP "'") != 0) return -1;
    memset(&seam, 0, sizeof seam);
    return 0;
}

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The file's contents (up to 255 bytes) as a string; "" when absent. */
static const char *get(const char *path) {
    static char buf[256];
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return buf;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* Entries of dir whose name contains ".tmp" (the temporary files). */
static int count_tmp(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp")) n++;
    closedir(d);
    return n;
}

static void assert_io_error(ot_status st, const ot_error *err, const char *path, const char *reason) {
    assert_int_equal(st, OT_E_IO);
    if (!strstr(err->msg, path) || !strstr(err->msg, reason))
        fail_msg("message '%s' should name '%s' and '%s'", err->msg, path, reason);
}

/* ---- commit and abort ------------------------------------------------------------ */

static void test_commit_replaces_whole(void **state) {
    (void)state;
    const char *out = TMP "/out.txt";
    put(out, "old contents");
    ot_atomic_file *af;
    ot_error err = {0};
    mode_t old_mask = umask(027);
    assert_int_equal(ot_atomic_open(out, &af, &err), OT_OK);
    umask(old_mask);
    fputs("new ", ot_atomic_stream(af));
    fprintf(ot_atomic_stream(af), "contents %d", 42);
    /* until the commit, readers see the old file; the new one is beside it */
    assert_string_equal(get(out), "old contents");
    assert_int_equal(count_tmp(TMP), 1);
    assert_int_equal(ot_atomic_commit(af, &err), OT_OK);
    assert_string_equal(get(out), "new contents 42");
    assert_int_equal(count_tmp(TMP), 0);
    struct stat sb;
    assert_int_equal(stat(out, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0640); /* 0666 less the umask, as fopen */
    /* a new file, and an empty one */
    assert_int_equal(ot_atomic_write(TMP "/new.bin", "\0\1\2", 3, &err), OT_OK);
    assert_int_equal(stat(TMP "/new.bin", &sb), 0);
    assert_int_equal(sb.st_size, 3);
    assert_int_equal(ot_atomic_write(TMP "/empty.bin", NULL, 0, &err), OT_OK);
    assert_int_equal(stat(TMP "/empty.bin", &sb), 0);
    assert_int_equal(sb.st_size, 0);
    assert_int_equal(count_tmp(TMP), 0);
}

static void test_abort_keeps_old(void **state) {
    (void)state;
    const char *out = TMP "/kept.txt";
    put(out, "old contents");
    ot_atomic_file *af;
    ot_error err = {0};
    assert_int_equal(ot_atomic_open(out, &af, &err), OT_OK);
    fputs("half a file", ot_atomic_stream(af));
    fflush(ot_atomic_stream(af));
    ot_atomic_abort(af);
    ot_atomic_abort(NULL);
    assert_string_equal(get(out), "old contents");
    assert_int_equal(count_tmp(TMP), 0);
    /* an abort of a file that did not exist leaves nothing */
    assert_int_equal(ot_atomic_open(TMP "/never.txt", &af, &err), OT_OK);
    ot_atomic_abort(af);
    assert_int_equal(access(TMP "/never.txt", F_OK), -1);
    assert_int_equal(count_tmp(TMP), 0);
}

/* The file is synced before the rename (the destination is still the old inode) and
 * its folder after (the destination is the new one). */
static void test_file_then_folder_synced(void **state) {
    (void)state;
    const char *out = TMP "/synced.txt";
    put(out, "old");
    struct stat old_sb, new_sb, dir_sb;
    assert_int_equal(stat(out, &old_sb), 0);
    seam.dest = out;
    ot_error err = {0};
    assert_int_equal(ot_atomic_write(out, "new", 3, &err), OT_OK);
    assert_int_equal(stat(out, &new_sb), 0);
    assert_int_equal(stat(TMP, &dir_sb), 0);
    assert_int_equal(seam.n_calls, 2);
    assert_false(seam.calls[0].is_dir);
    assert_true(seam.calls[0].ino == new_sb.st_ino);
    assert_true(seam.calls[0].dest_ino == old_sb.st_ino);
    assert_true(seam.calls[1].is_dir);
    assert_true(seam.calls[1].ino == dir_sb.st_ino);
    assert_true(seam.calls[1].dest_ino == new_sb.st_ino);
    /* a destination without a folder part: the folder is "." */
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(TMP), 0);
    seam.n_calls = 0;
    seam.dest = "here.txt";
    ot_status st = ot_atomic_write("here.txt", "x", 1, &err);
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(st, OT_OK);
    assert_int_equal(seam.n_calls, 2);
    assert_true(seam.calls[1].is_dir && seam.calls[1].ino == dir_sb.st_ino);
}

/* ---- failures -------------------------------------------------------------------- */

static void test_write_error_keeps_old(void **state) {
    (void)state;
    const char *out = TMP "/big.bin";
    put(out, "old contents");
    /* the file size limit makes write(2) fail with EFBIG part way, as a full disk would */
    struct rlimit old_lim, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old_lim), 0);
    lim = old_lim;
    lim.rlim_cur = 4096;
    void (*old_sig)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    static char data[1 << 16];
    memset(data, 'x', sizeof data);
    ot_error err = {0};
    ot_status st = ot_atomic_write(out, data, sizeof data, &err);
    /* the same through the stream, failing in the middle of the output */
    ot_atomic_file *af;
    ot_error err2 = {0};
    ot_status st2 = ot_atomic_open(out, &af, &err2);
    if (!st2) {
        for (int i = 0; i < 2000; i++)
            fprintf(ot_atomic_stream(af), "line %d of many\n", i);
        st2 = ot_atomic_commit(af, &err2);
    }
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old_lim), 0);
    signal(SIGXFSZ, old_sig);
    assert_io_error(st, &err, out, strerror(EFBIG));
    assert_io_error(st2, &err2, out, strerror(EFBIG));
    assert_string_equal(get(out), "old contents");
    assert_int_equal(count_tmp(TMP), 0);
}

static void test_fsync_failures(void **state) {
    (void)state;
    const char *out = TMP "/fsync.txt";
    put(out, "old contents");
    ot_error err = {0};
    seam.fail_file_errno = EIO;
    assert_io_error(ot_atomic_write(out, "new", 3, &err), &err, out, strerror(EIO));
    assert_string_equal(get(out), "old contents");
    assert_int_equal(count_tmp(TMP), 0);
    /* the folder: after the rename, so the new file is in place, but it is said */
    seam.fail_file_errno = 0;
    seam.fail_dir_errno = EIO;
    assert_io_error(ot_atomic_write(out, "new", 3, &err), &err, out, strerror(EIO));
    assert_non_null(strstr(err.msg, "folder"));
    assert_string_equal(get(out), "new");
    assert_int_equal(count_tmp(TMP), 0);
    /* a file system that cannot sync folders is not a failure */
    seam.fail_dir_errno = EINVAL;
    assert_int_equal(ot_atomic_write(out, "newer", 5, &err), OT_OK);
    assert_string_equal(get(out), "newer");
}

static void test_rename_fails_over_folder(void **state) {
    (void)state;
    const char *out = TMP "/adir";
    assert_int_equal(system("mkdir -p '" TMP "/adir/sub'"), 0);
    ot_error err = {0};
    ot_status st = ot_atomic_write(out, "x", 1, &err);
    assert_int_equal(st, OT_E_IO);
    assert_non_null(strstr(err.msg, out));
    assert_non_null(strstr(err.msg, "rename"));
    struct stat sb;
    assert_int_equal(stat(TMP "/adir/sub", &sb), 0);
    assert_int_equal(count_tmp(TMP), 0);
}

static void test_missing_folder(void **state) {
    (void)state;
    ot_error err = {0};
    ot_atomic_file *af = (ot_atomic_file *)&err; /* must be reset to NULL */
    const char *out = TMP "/no/such/dir/x.onnx";
    assert_io_error(ot_atomic_open(out, &af, &err), &err, out, strerror(ENOENT));
    assert_null(af);
    assert_io_error(ot_atomic_write(out, "x", 1, &err), &err, out, strerror(ENOENT));
}

/* Run as another user when root, for whom no folder is unwritable. */
static void test_unwritable_folder(void **state) {
    (void)state;
    const char *dir = TMP "/ro", *out = TMP "/ro/x.json";
    assert_int_equal(mkdir(dir, 0755), 0);
    put(TMP "/ro/x.json", "old contents");
    assert_int_equal(chmod(dir, 0555), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(10);
        ot_error err = {0};
        ot_status st = ot_atomic_write(out, "new", 3, &err);
        if (st != OT_E_IO) _exit(11);
        if (!strstr(err.msg, out) || !strstr(err.msg, strerror(EACCES))) _exit(12);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    chmod(dir, 0755);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_string_equal(get(out), "old contents");
    assert_int_equal(count_tmp(dir), 0);
}

/* Character devices are written in place: /dev/full fails as a full disk does, and
 * neither it nor /dev/null is replaced by a regular file. */
static void test_devices_written_in_place(void **state) {
    (void)state;
    struct stat sb;
    if (stat("/dev/full", &sb) != 0 || !S_ISCHR(sb.st_mode)) fail_msg("/dev/full is missing here");
    static char data[1 << 16];
    ot_error err = {0};
    assert_io_error(ot_atomic_write("/dev/full", data, sizeof data, &err), &err, "/dev/full", strerror(ENOSPC));
    assert_io_error(ot_atomic_write("/dev/full", "x", 1, &err), &err, "/dev/full", strerror(ENOSPC));
    ot_atomic_file *af;
    assert_int_equal(ot_atomic_open("/dev/full", &af, &err), OT_OK);
    fputs("{}", ot_atomic_stream(af));
    assert_io_error(ot_atomic_commit(af, &err), &err, "/dev/full", strerror(ENOSPC));
    assert_int_equal(stat("/dev/full", &sb), 0);
    assert_true(S_ISCHR(sb.st_mode));
    assert_int_equal(ot_atomic_write("/dev/null", data, sizeof data, &err), OT_OK);
    assert_int_equal(stat("/dev/null", &sb), 0);
    assert_true(S_ISCHR(sb.st_mode));
}

/* A FIFO nobody reads, as the destination (a checkpoint's final name, --report):
 * refused at once instead of blocking in open for ever; one with a reader takes the
 * bytes in place. alarm() turns a hang into a failure. */
static void test_fifo_without_reader_refused(void **state) {
    (void)state;
    const char *fifo = TMP "/out.fifo";
    unlink(fifo);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    alarm(10);
    ot_error err = {0};
    assert_io_error(ot_atomic_write(fifo, "x", 1, &err), &err, fifo, "no process reads");
    pid_t reader = fork();
    if (reader == 0) {
        FILE *f = fopen(fifo, "r");
        char buf[8] = {0};
        size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
        _exit(n == 2 && !memcmp(buf, "ok", 2) ? 0 : 1);
    }
    /* the reader opens in its own time: retry until it is there */
    ot_status st;
    for (int i = 0; i < 200 && (st = ot_atomic_write(fifo, "ok", 2, &err)) == OT_E_IO; i++) usleep(10000);
    assert_int_equal(st, OT_OK);
    int ws = 0;
    assert_int_equal(waitpid(reader, &ws, 0), reader);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    alarm(0);
    struct stat sb;
    assert_int_equal(stat(fifo, &sb), 0);
    assert_true(S_ISFIFO(sb.st_mode));
    unlink(fifo);
}

/* ---- the temporary name ---------------------------------------------------------- */

/* The temporary name PATH.tmp-XXXXXX, with getentropy made to repeat itself. */
static void fixed_tmp_name(const char *path, char *buf, size_t n) {
    seam.fixed_name = true;
    ot_atomic_file *af;
    ot_error err = {0};
    assert_int_equal(ot_atomic_open(path, &af, &err), OT_OK);
    DIR *d = opendir(TMP);
    struct dirent *e;
    buf[0] = 0;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp-")) snprintf(buf, n, "%s/%s", TMP, e->d_name);
    closedir(d);
    ot_atomic_abort(af);
    assert_true(strlen(buf) == strlen(path) + strlen(".tmp-XXXXXX"));
    assert_memory_equal(buf, path, strlen(path));
}

/* A symlink at the temporary name is neither followed nor replaced: the name is
 * taken, and after every try the write fails cleanly; the symlink's target is
 * unchanged. The same for a regular file planted there. */
static void test_planted_symlink_not_followed(void **state) {
    (void)state;
    const char *out = TMP "/model.onnx", *target = TMP "/victim";
    char tmp[4096];
    fixed_tmp_name(out, tmp, sizeof tmp);
    put(target, "precious");
    put(out, "old contents");
    assert_int_equal(symlink(target, tmp), 0);
    ot_error err = {0};
    ot_status st = ot_atomic_write(out, "attack", 6, &err);
    assert_io_error(st, &err, out, strerror(EEXIST));
    assert_string_equal(get(target), "precious");
    assert_string_equal(get(out), "old contents");
    struct stat sb;
    assert_int_equal(lstat(tmp, &sb), 0);
    assert_true(S_ISLNK(sb.st_mode)); /* not ours: left alone */
    /* a dangling symlink: not created through */
    unlink(tmp);
    unlink(target);
    assert_int_equal(symlink(target, tmp), 0);
    assert_int_equal(ot_atomic_write(out, "attack", 6, &err), OT_E_IO);
    assert_int_equal(lstat(target, &sb), -1);
    unlink(tmp);
    /* with fresh names again, the write goes through */
    seam.fixed_name = false;
    assert_int_equal(ot_atomic_write(out, "new", 3, &err), OT_OK);
    assert_string_equal(get(out), "new");
    assert_int_equal(count_tmp(TMP), 0);
}

/* ---- the writers built on it ------------------------------------------------------ */

static void test_writers_report_full_disk(void **state) {
    (void)state;
    ot_error err = {0};
    int64_t d[1] = {1000};
    ot_shape sh = ot_shape_make(1, d);
    ot_tensor *t = ot_tensor_new(OT_F32, &sh);
    assert_non_null(t);
    assert_io_error(ot_npy_write("/dev/full", t, &err), &err, "/dev/full", strerror(ENOSPC));
    assert_int_equal(ot_npy_write(TMP "/t.npy", t, &err), OT_OK);
    ot_tensor_free(t);

    ot_checkpoint c;
    memset(&c, 0, sizeof c);
    float w[4] = {1, 2, 3, 4};
    int64_t d4[1] = {4};
    ot_shape s4 = ot_shape_make(1, d4);
    assert_int_equal(ot_checkpoint_add(&c, "w", OT_CKPT_PARAM, OT_F32, &s4, w, sizeof w, &err), OT_OK);
    assert_io_error(ot_checkpoint_write(&c, "/dev/full", &err), &err, "/dev/full", strerror(ENOSPC));
    assert_non_null(strstr(err.msg, "checkpoint"));
    assert_int_equal(ot_checkpoint_write(&c, TMP "/c.otc", &err), OT_OK);
    ot_checkpoint_free(&c);

    ot_report_info info = {.model = "m.onnx", .loss = "mse"};
    ot_optim_config oc;
    ot_optim_config_default(&oc, OT_OPTIM_SGD);
    ot_train_result r = {0};
    assert_io_error(ot_report_write("/dev/full", &info, &oc, &r, NULL, &err), &err, "/dev/full", strerror(ENOSPC));
    assert_int_equal(ot_report_write(TMP "/r.json", &info, &oc, &r, NULL, &err), OT_OK);
    assert_int_equal(count_tmp(TMP), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_commit_replaces_whole, setup),
        cmocka_unit_test_setup(test_abort_keeps_old, setup),
        cmocka_unit_test_setup(test_file_then_folder_synced, setup),
        cmocka_unit_test_setup(test_write_error_keeps_old, setup),
        cmocka_unit_test_setup(test_fsync_failures, setup),
        cmocka_unit_test_setup(test_rename_fails_over_folder, setup),
        cmocka_unit_test_setup(test_missing_folder, setup),
        cmocka_unit_test_setup(test_unwritable_folder, setup),
        cmocka_unit_test_setup(test_devices_written_in_place, setup),
        cmocka_unit_test_setup(test_fifo_without_reader_refused, setup),
        cmocka_unit_test_setup(test_planted_symlink_not_followed, setup),
        cmocka_unit_test_setup(test_writers_report_full_disk, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
