/* test_checkpoint.c — training checkpoints and numerics checks: the file format
 * (round trip, checksum, truncation, version), keeping the last K, finding the newest
 * valid one, refusing other settings; and, through the built `onnxtrain`, resuming
 * bitwise (mlp, resnet with BatchNorm, tinygpt with Dropout; Adam), refusing another
 * model or a damaged file, SIGTERM/SIGINT ending with a checkpoint and a resume
 * command, and --check-numerics naming the forward, backward and optimizer phase. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixtures/onnx_builder.h"
#include "train/checkpoint.h"
#include "cli_run.h"
#include "train/npy.h"

#define BIN OT_BINARY_DIR "/onnxtrain"
#define S OT_SOURCE_DIR "/samples/"
#define TMP OT_BINARY_DIR "/test_checkpoint_tmp"

/* ---- helpers ------------------------------------------------------------------- */

/* Runs a shell command, its output in TMP/out.txt. */
#define run(...) cli_run(TMP "/out.txt", __VA_ARGS__)

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t got = fread(b, 1, (size_t)n, f);
    b[got] = 0;
    fclose(f);
    if (len) *len = got;
    return b;
}

static void expect_output(const char *needle) {
    char *o = slurp(TMP "/out.txt", NULL);
    assert_non_null(o);
    if (!strstr(o, needle)) fail_msg("expected '%s' in the output:\n%s", needle, o);
    free(o);
}

static void expect_same_file(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *x = slurp(a, &na), *y = slurp(b, &nb);
    assert_non_null(x);
    assert_non_null(y);
    if (na != nb || memcmp(x, y, na)) fail_msg("%s and %s differ (%zu vs %zu bytes)", a, b, na, nb);
    free(x);
    free(y);
}

static bool exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Temporary files (NAME.tmp-XXXXXX, ir/atomic_file.c) left in dir. */
static int tmp_files_in(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp")) n++;
    closedir(d);
    return n;
}

static int setup(void **state) {
    (void)state;
    setenv("OMP_WAIT_POLICY", "PASSIVE", 0); /* spares each onnxtrain its re-exec (cli/main.c) */
    if (system("rm -rf " TMP) != 0) return -1;
    return mkdir(TMP, 0777);
}

/* A small checkpoint with two tensors and distinctive settings. */
static void make_ckpt(ot_checkpoint *c, int64_t step) {
    ot_error err = {0};
    memset(c, 0, sizeof *c);
    c->fingerprint = 0x0123456789abcdefULL;
    c->step = step;
    c->micro_batches = 2 * step; /* accum 2; 35 samples in batches of 4: 8 batches per epoch */
    c->epoch = 2 * step / 8;
    c->epoch_batch = 2 * step % 8;
    c->set.batch_size = 4;
    c->set.accum = 2;
    c->set.n_samples = 35;
    c->set.seed = 99;
    c->set.loss_kind = 1;
    ot_optim_config_default(&c->set.optim, OT_OPTIM_ADAM);
    c->set.optim.lr = 0.125;
    c->set.optim.schedule = OT_SCHED_COSINE;
    c->set.optim.total_steps = 40;
    snprintf(c->set.remat, sizeof c->set.remat, "selective");
    int64_t d[2] = {2, 3};
    ot_shape sh = ot_shape_make(2, d);
    float w[6] = {1, -2, 3.5f, NAN, 0, (float)step};
    assert_int_equal(ot_checkpoint_add(c, "fc.weight", OT_CKPT_PARAM, OT_F32, &sh, w, sizeof w, &err), OT_OK);
    ot_shape s1 = ot_shape_make(1, d);
    double m[2] = {0.5, -0.25};
    assert_int_equal(ot_checkpoint_add(c, "fc.weight.exp_avg", OT_CKPT_OPT_STATE, OT_F64, &s1, m, sizeof m, &err),
                     OT_OK);
}

/* ---- the format ------------------------------------------------------------------ */

static void test_roundtrip(void **state) {
    (void)state;
    ot_checkpoint c, d;
    ot_error err = {0};
    make_ckpt(&c, 5);
    assert_int_equal(ot_checkpoint_write(&c, TMP "/a.otc", &err), OT_OK);
    assert_int_equal(tmp_files_in(TMP), 0);
    assert_int_equal(ot_checkpoint_read(TMP "/a.otc", &d, &err), OT_OK);
    assert_true(d.fingerprint == c.fingerprint);
    assert_int_equal(d.step, 5);
    assert_int_equal(d.micro_batches, 10);
    assert_int_equal(d.epoch, 1);
    assert_int_equal(d.epoch_batch, 2);
    assert_int_equal(d.set.batch_size, 4);
    assert_int_equal(d.set.accum, 2);
    assert_int_equal(d.set.n_samples, 35);
    assert_int_equal(d.set.seed, 99);
    assert_int_equal(d.set.loss_kind, 1);
    assert_int_equal(d.set.optim.kind, OT_OPTIM_ADAM);
    assert_true(d.set.optim.lr == 0.125);
    assert_true(d.set.optim.beta2 == 0.999);
    assert_int_equal(d.set.optim.schedule, OT_SCHED_COSINE);
    assert_int_equal(d.set.optim.total_steps, 40);
    assert_string_equal(d.set.remat, "selective");
    assert_int_equal(ot_checkpoint_check_settings(&c.set, &d.set, "x", &err), OT_OK);
    assert_int_equal(d.n_tensors, 2);
    for (int i = 0; i < 2; i++) {
        assert_string_equal(d.tensors[i].name, c.tensors[i].name);
        assert_int_equal(d.tensors[i].kind, c.tensors[i].kind);
        assert_int_equal(d.tensors[i].dtype, c.tensors[i].dtype);
        assert_true(ot_shape_equal(&d.tensors[i].shape, &c.tensors[i].shape));
        assert_int_equal(d.tensors[i].nbytes, c.tensors[i].nbytes);
        assert_memory_equal(d.tensors[i].data, c.tensors[i].data, c.tensors[i].nbytes); /* NaN bits too */
    }
    assert_non_null(ot_checkpoint_find_tensor(&d, "fc.weight.exp_avg"));
    assert_null(ot_checkpoint_find_tensor(&d, "nope"));
    ot_checkpoint_free(&c);
    ot_checkpoint_free(&d);
}

/* Every damaged form is refused with OT_E_DATA naming the file and the damage. */
static void test_damaged_refused(void **state) {
    (void)state;
    ot_checkpoint c, d;
    ot_error err = {0};
    uint8_t *buf = NULL;
    size_t len = 0;
    make_ckpt(&c, 3);
    assert_int_equal(ot_checkpoint_encode(&c, &buf, &len, &err), OT_OK);
    assert_int_equal(ot_checkpoint_decode(buf, len, "ok.otc", &d, &err), OT_OK);
    ot_checkpoint_free(&d);
    for (size_t at = 32; at < len; at += 7) { /* any flipped payload byte */
        buf[at] ^= 0x10;
        assert_int_equal(ot_checkpoint_decode(buf, len, "flip.otc", &d, &err), OT_E_DATA);
        assert_non_null(strstr(err.msg, "flip.otc"));
        assert_non_null(strstr(err.msg, "checksum"));
        buf[at] ^= 0x10;
    }
    for (size_t n = 0; n < len; n += 5) { /* any truncation */
        assert_int_equal(ot_checkpoint_decode(buf, n, "cut.otc", &d, &err), OT_E_DATA);
        assert_non_null(strstr(err.msg, "cut.otc"));
    }
    assert_int_equal(ot_checkpoint_decode(buf, len - 1, "cut.otc", &d, &err), OT_E_DATA);
    assert_non_null(strstr(err.msg, "truncated"));
    buf[8] = 2; /* version */
    assert_int_equal(ot_checkpoint_decode(buf, len, "v2.otc", &d, &err), OT_E_DATA);
    assert_non_null(strstr(err.msg, "version 2"));
    buf[8] = 1;
    buf[0] = 'X';
    assert_int_equal(ot_checkpoint_decode(buf, len, "magic.otc", &d, &err), OT_E_DATA);
    assert_non_null(strstr(err.msg, "not an onnxtrain checkpoint"));
    free(buf);
    assert_int_equal(ot_checkpoint_read(TMP "/missing.otc", &d, &err), OT_E_IO);
    assert_non_null(strstr(err.msg, "missing.otc"));
    ot_checkpoint_free(&c);
}

/* Rewrites the header's payload length and checksum for `len` bytes, as a crafted
 * file would: the parser must then catch the damage itself. */
static void reseal(uint8_t *buf, size_t len) {
    uint64_t n = len - 32, sum = ot_fnv1a64(OT_FNV_OFFSET, buf + 32, len - 32);
    for (int i = 0; i < 8; i++) {
        buf[16 + i] = (uint8_t)(n >> (8 * i));
        buf[24 + i] = (uint8_t)(sum >> (8 * i));
    }
}

/* Crafted files with a valid checksum: every single-byte change, a payload cut short,
 * trailing bytes — each parses or is refused with OT_E_DATA, never read out of bounds
 * (the sanitizer build runs this too). */
static void test_crafted_payloads(void **state) {
    (void)state;
    ot_checkpoint c, d;
    ot_error err = {0};
    uint8_t *buf = NULL;
    size_t len = 0;
    make_ckpt(&c, 3);
    assert_int_equal(ot_checkpoint_encode(&c, &buf, &len, &err), OT_OK);
    uint8_t *w = malloc(len + 1);
    assert_non_null(w);
    int refused = 0;
    for (size_t at = 32; at < len; at++) {
        memcpy(w, buf, len);
        w[at] ^= 0xff;
        reseal(w, len);
        ot_status st = ot_checkpoint_decode(w, len, "crafted.otc", &d, &err);
        if (st) {
            assert_int_equal(st, OT_E_DATA);
            assert_non_null(strstr(err.msg, "crafted.otc"));
            refused++;
        }
        ot_checkpoint_free(&d);
    }
    assert_true(refused > 0); /* counts and lengths were hit */
    memcpy(w, buf, len);
    reseal(w, len - 1);
    assert_int_equal(ot_checkpoint_decode(w, len - 1, "short.otc", &d, &err), OT_E_DATA);
    memcpy(w, buf, len);
    w[len] = 0;
    reseal(w, len + 1);
    assert_int_equal(ot_checkpoint_decode(w, len + 1, "long.otc", &d, &err), OT_E_DATA);
    assert_non_null(strstr(err.msg, "trailing bytes"));
    free(w);
    free(buf);
    ot_checkpoint_free(&c);
}

/* save_dir keeps the newest K; load_latest takes the newest readable one. */
static void test_keep_and_latest(void **state) {
    (void)state;
    ot_error err = {0}, skipped = {0};
    char path[4096];
    const char *dir = TMP "/keep";
    for (int64_t step = 2; step <= 12; step += 2) {
        ot_checkpoint c;
        make_ckpt(&c, step);
        assert_int_equal(ot_checkpoint_save_dir(&c, dir, 3, path, sizeof path, &err), OT_OK);
        ot_checkpoint_free(&c);
    }
    assert_string_equal(path, TMP "/keep/ckpt-12.otc");
    assert_false(exists(TMP "/keep/ckpt-2.otc"));
    assert_false(exists(TMP "/keep/ckpt-6.otc"));
    assert_true(exists(TMP "/keep/ckpt-8.otc")); /* 8 < 10 < 12: numeric order, not text */
    assert_true(exists(TMP "/keep/ckpt-10.otc"));
    assert_int_equal(tmp_files_in(TMP "/keep"), 0);
    /* the temporary file of a write cut short (a crash) is no checkpoint */
    FILE *cut = fopen(TMP "/keep/ckpt-16.otc.tmp-Ab12Cd", "wb");
    assert_non_null(cut);
    fputs("ONNXTCKP half", cut);
    fclose(cut);
    ot_checkpoint d;
    assert_int_equal(ot_checkpoint_load_latest(dir, &d, path, sizeof path, &skipped, &err), OT_OK);
    assert_int_equal(d.step, 12);
    assert_int_equal(skipped.code, OT_OK);
    ot_checkpoint_free(&d);
    unlink(TMP "/keep/ckpt-16.otc.tmp-Ab12Cd");
    /* a damaged newest one is skipped, and said so */
    FILE *f = fopen(TMP "/keep/ckpt-14.otc", "wb");
    assert_non_null(f);
    fputs("ONNXTCKP garbage", f);
    fclose(f);
    assert_int_equal(ot_checkpoint_load_latest(dir, &d, path, sizeof path, &skipped, &err), OT_OK);
    assert_int_equal(d.step, 12);
    assert_string_equal(path, TMP "/keep/ckpt-12.otc");
    assert_int_equal(skipped.code, OT_E_DATA);
    assert_non_null(strstr(skipped.msg, "ckpt-14.otc"));
    ot_checkpoint_free(&d);
    /* a file is read as is, damaged or not */
    assert_int_equal(ot_checkpoint_load_latest(TMP "/keep/ckpt-14.otc", &d, path, sizeof path, NULL, &err), OT_E_DATA);
    assert_non_null(strstr(err.msg, "ckpt-14.otc"));
    /* an empty folder and a missing one */
    mkdir(TMP "/empty", 0777);
    assert_int_equal(ot_checkpoint_load_latest(TMP "/empty", &d, path, sizeof path, NULL, &err), OT_E_IO);
    assert_non_null(strstr(err.msg, "no checkpoint"));
    assert_int_equal(ot_checkpoint_load_latest(TMP "/nowhere", &d, path, sizeof path, NULL, &err), OT_E_IO);
}

static void test_settings_differ(void **state) {
    (void)state;
    ot_checkpoint c;
    ot_error err = {0};
    make_ckpt(&c, 1);
    ot_ckpt_settings run = c.set;
    snprintf(run.remat, sizeof run.remat, "all"); /* remat may differ: same results */
    run.memory_budget = 1 << 20;
    assert_int_equal(ot_checkpoint_check_settings(&run, &c.set, "c.otc", &err), OT_OK);
    run.batch_size = 8;
    run.optim.kind = OT_OPTIM_SGD;
    assert_int_equal(ot_checkpoint_check_settings(&run, &c.set, "c.otc", &err), OT_E_DATA);
    assert_non_null(strstr(err.msg, "c.otc"));
    assert_non_null(strstr(err.msg, "--batch-size 8 (checkpoint: 4)"));
    assert_non_null(strstr(err.msg, "--optimizer sgd (checkpoint: adam)"));
    run = c.set;
    run.seed = 1;
    assert_int_equal(ot_checkpoint_check_settings(&run, &c.set, "c.otc", &err), OT_E_DATA);
    assert_non_null(strstr(err.msg, "--seed"));
    run = c.set;
    run.optim.total_steps = 41; /* cosine over another length: other learning rates */
    assert_int_equal(ot_checkpoint_check_settings(&run, &c.set, "c.otc", &err), OT_E_DATA);
    ot_checkpoint_free(&c);
}

/* ---- resuming through the CLI ----------------------------------------------------- */

/* Trains `steps` steps straight, and 10 steps + resume to `steps` (the resumed run
 * with `resume_args` added); the tuned models must be the same bytes. */
static void check_resume_bitwise(const char *name, const char *args, const char *resume_args, int steps) {
    char base[2048], dir[1024];
    snprintf(base, sizeof base,
             BIN " train " S "%s.onnx --input " S "%s/input.npy --labels " S "%s/labels.npy --threads 2 --quiet %s",
             name, name, name, args);
    snprintf(dir, sizeof dir, TMP "/%s_ck", name);
    assert_int_equal(run("%s --steps %d -o " TMP "/%s_full.onnx", base, steps, name), 0);
    assert_int_equal(
        run("%s --steps 10 --checkpoint-dir %s --checkpoint-every 5 -o " TMP "/%s_half.onnx", base, dir, name), 0);
    char ck[1200];
    snprintf(ck, sizeof ck, "%s/ckpt-10.otc", dir);
    assert_true(exists(ck));
    assert_int_equal(
        run("%s %s --steps %d --resume %s -o " TMP "/%s_resumed.onnx", base, resume_args, steps, dir, name), 0);
    char a[1024], b[1024];
    snprintf(a, sizeof a, TMP "/%s_full.onnx", name);
    snprintf(b, sizeof b, TMP "/%s_resumed.onnx", name);
    expect_same_file(a, b);
    /* and the checkpoint did matter: the half-trained model differs from the full one */
    snprintf(b, sizeof b, TMP "/%s_half.onnx", name);
    size_t na, nb;
    char *x = slurp(a, &na), *y = slurp(b, &nb);
    assert_true(na != nb || memcmp(x, y, na) != 0);
    free(x);
    free(y);
}

static void test_resume_bitwise_mlp(void **state) {
    (void)state;
    /* accumulation, clipping, a warm-up across the resume point, shuffling across epochs
     * (7 samples). (A cosine schedule depends on the run length, so 10 + 10 steps is a
     * different run: test_settings_differ.) */
    check_resume_bitwise("mlp",
                         "--optimizer adam --lr 0.01 --batch-size 2 --accum 2 --clip-grad-norm 1 "
                         "--schedule warmup --warmup-steps 15 --seed 11",
                         "", 20);
}

static void test_resume_bitwise_resnet(void **state) {
    (void)state;
    check_resume_bitwise("resnet", "--optimizer adam --lr 0.01", "", 20); /* BatchNorm running statistics */
}

static void test_resume_bitwise_tinygpt(void **state) {
    (void)state;
    /* Dropout; the resumed run also swaps --remat selective for all (remat never changes results) */
    check_resume_bitwise("tinygpt", "--optimizer adamw --batch-size 4 --seed 3 --remat selective", "--remat all", 20);
}

/* Another model, other settings, a damaged file: refused, naming the file. */
static void test_resume_refusals(void **state) {
    (void)state;
    const char *mlp = BIN " train " S "mlp.onnx --input " S "mlp/input.npy --labels " S "mlp/labels.npy --quiet";
    assert_int_equal(run("%s --optimizer adam --batch-size 4 --steps 4 --checkpoint-dir " TMP
                         "/ref --checkpoint-every 2 -o " TMP "/r.onnx",
                         mlp),
                     0);
    assert_true(exists(TMP "/ref/ckpt-4.otc"));
    /* chain48 shares mlp's input name but is another model */
    assert_int_equal(run(BIN " train " S "chain48.onnx --input " S "chain48/input.npy --labels " S "chain48/labels.npy "
                             "--optimizer adam --batch-size 4 --steps 8 --resume " TMP "/ref -o " TMP "/r2.onnx"),
                     5);
    expect_output("ckpt-4.otc");
    expect_output("another model");
    assert_false(exists(TMP "/r2.onnx"));
    assert_int_equal(run("%s --optimizer adam --batch-size 2 --steps 8 --resume " TMP "/ref -o " TMP "/r2.onnx", mlp),
                     8);
    expect_output("ckpt-4.otc");
    expect_output("--batch-size 2 (checkpoint: 4)");
    assert_int_equal(run("%s --optimizer sgd --batch-size 4 --steps 8 --resume " TMP "/ref -o " TMP "/r2.onnx", mlp),
                     8);
    expect_output("--optimizer sgd (checkpoint: adam)");
    assert_int_equal(run("%s --optimizer adam --batch-size 4 --steps 8 --freeze '^fc1' --resume " TMP "/ref -o " TMP
                         "/r2.onnx",
                         mlp),
                     8);
    expect_output("ckpt-4.otc");
    expect_output("--freeze");
    assert_int_equal(run("%s --optimizer adam --batch-size 4 --steps 4 --resume " TMP "/ref -o " TMP "/r2.onnx", mlp),
                     2);
    expect_output("nothing left");
    /* flip one byte in the middle of the newest file */
    int fd = open(TMP "/ref/ckpt-4.otc", O_RDWR);
    assert_true(fd >= 0);
    off_t end = lseek(fd, 0, SEEK_END);
    unsigned char b = 0;
    assert_int_equal(pread(fd, &b, 1, end / 2), 1);
    b ^= 0x01;
    assert_int_equal(pwrite(fd, &b, 1, end / 2), 1);
    close(fd);
    assert_int_equal(
        run("%s --optimizer adam --batch-size 4 --steps 8 --resume " TMP "/ref/ckpt-4.otc -o " TMP "/r2.onnx", mlp), 8);
    expect_output("ckpt-4.otc");
    expect_output("checksum");
    /* the folder falls back to the older valid one and says so */
    assert_int_equal(run("%s --optimizer adam --batch-size 4 --steps 8 --resume " TMP "/ref -o " TMP "/r2.onnx", mlp),
                     0);
    expect_output("skipped a newer checkpoint");
    expect_output("ckpt-4.otc");
    assert_true(exists(TMP "/r2.onnx"));
}

/* --keep-checkpoints through the CLI, and --help naming every option and exit code. */
static void test_cli_keep_and_help(void **state) {
    (void)state;
    assert_int_equal(run(BIN " train " S "mlp.onnx --input " S "mlp/input.npy --labels " S "mlp/labels.npy --quiet "
                             "--steps 6 --checkpoint-dir " TMP "/k2 --checkpoint-every 1 --keep-checkpoints 2 -o " TMP
                             "/k2.onnx"),
                     0);
    for (int step = 1; step <= 6; step++) {
        char p[1024];
        snprintf(p, sizeof p, TMP "/k2/ckpt-%d.otc", step);
        if (exists(p) != (step >= 5)) fail_msg("%s: %s", p, step >= 5 ? "missing" : "should have been removed");
    }
    assert_int_equal(run(BIN " train --help"), 0);
    const char *want[] = {"--checkpoint-dir",
                          "--checkpoint-every",
                          "--keep-checkpoints",
                          "--resume",
                          "--check-numerics",
                          "--no-check-numerics",
                          "130",
                          "143",
                          "TUNED.onnx.ckpt"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        expect_output(want[i]);
}

/* ---- signals ---------------------------------------------------------------------- */

/* Starts `onnxtrain` with argv (NULL-terminated) and its stderr in `log`. */
static pid_t spawn(char *const *argv, const char *log) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) _exit(127);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(BIN, argv);
        _exit(127);
    }
    return pid;
}

/* Waits (up to ~60 s) until `log` contains `needle`; fails if the child ends first. */
static void wait_for_text(pid_t pid, const char *log, const char *needle) {
    for (int i = 0; i < 6000; i++) {
        char *o = slurp(log, NULL);
        bool found = o && strstr(o, needle);
        free(o);
        if (found) return;
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) fail_msg("onnxtrain ended before printing '%s'", needle);
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    fail_msg("timed out waiting for '%s' in %s", needle, log);
}

/* Reads "after step N of" from the log. */
static long stopped_step(const char *log) {
    char *o = slurp(log, NULL);
    assert_non_null(o);
    char *p = strstr(o, "after step ");
    if (!p) fail_msg("no 'after step' in:\n%s", o);
    long n = strtol(p + 11, NULL, 10);
    free(o);
    return n;
}

/* SIGTERM mid-run: exit 143 with a checkpoint and the resume command; resuming gives
 * the same model as a straight run of the same length. */
static void test_sigterm_checkpoints_and_resumes(void **state) {
    (void)state;
    const char *log = TMP "/sigterm.log";
    char *argv[] = {"onnxtrain",
                    "train",
                    S "mlp.onnx",
                    "--input",
                    S "mlp/input.npy",
                    "--labels",
                    S "mlp/labels.npy",
                    "--optimizer",
                    "adam",
                    "--batch-size",
                    "3",
                    "--steps",
                    "1000000",
                    "--threads",
                    "1",
                    "--log-every",
                    "5",
                    "--checkpoint-dir",
                    TMP "/sig",
                    "--checkpoint-every",
                    "50",
                    "-o",
                    TMP "/sig.onnx",
                    NULL};
    pid_t pid = spawn(argv, log);
    wait_for_text(pid, log, "step 60/");
    kill(pid, SIGTERM);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 143);
    long n = stopped_step(log);
    assert_true(n >= 60);
    run("cat %s", log);
    expect_output("interrupted by SIGTERM");
    expect_output("resume with: onnxtrain train");
    expect_output("--resume " TMP "/sig");
    char ck[1024];
    snprintf(ck, sizeof ck, TMP "/sig/ckpt-%ld.otc", n);
    assert_true(exists(ck));
    assert_false(exists(TMP "/sig.onnx"));
    /* resume to n + 7 steps, and compare with a straight run of n + 7 */
    const char *common =
        " train " S "mlp.onnx --input " S "mlp/input.npy --labels " S "mlp/labels.npy --optimizer adam "
        "--batch-size 3 --threads 1 --quiet";
    assert_int_equal(run(BIN "%s --steps %ld --resume " TMP "/sig -o " TMP "/sig.onnx", common, n + 7), 0);
    assert_int_equal(run(BIN "%s --steps %ld -o " TMP "/straight.onnx", common, n + 7), 0);
    expect_same_file(TMP "/sig.onnx", TMP "/straight.onnx");
}

/* SIGINT without --checkpoint-dir: exit 130, the checkpoint goes to TUNED.onnx.ckpt/. */
static void test_sigint_default_dir(void **state) {
    (void)state;
    const char *log = TMP "/sigint.log";
    char *argv[] = {
        "onnxtrain",     "train",   S "mlp.onnx", "--input", S "mlp/input.npy", "--labels", S "mlp/labels.npy",
        "--steps",       "1000000", "--threads",  "1",       "--log-every",     "5",        "-o",
        TMP "/int.onnx", NULL};
    pid_t pid = spawn(argv, log);
    wait_for_text(pid, log, "step 10/");
    kill(pid, SIGINT);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 130);
    long n = stopped_step(log);
    char ck[1024];
    snprintf(ck, sizeof ck, TMP "/int.onnx.ckpt/ckpt-%ld.otc", n);
    assert_true(exists(ck));
    run("cat %s", log);
    expect_output("interrupted by SIGINT");
    expect_output("--resume " TMP "/int.onnx.ckpt");
    assert_int_equal(run(BIN " train " S "mlp.onnx --input " S "mlp/input.npy --labels " S "mlp/labels.npy --threads 1 "
                             "--steps %ld --resume " TMP "/int.onnx.ckpt -o " TMP "/int.onnx",
                         n + 2),
                     0);
    assert_true(exists(TMP "/int.onnx"));
}

/* ---- numerics ------------------------------------------------------------------------ */

/* x [batch,4] -> MatMul W (identity) -> h -> `tail` -> y, trained with mse. */
static void write_model(const char *path, const char *tail) {
    mb *b = mb_new(17);
    int64_t xd[2] = {-1, 4}, wd[2] = {4, 4};
    const char *syms[2] = {"batch", NULL};
    mb_input(b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, xd, syms);
    float w[16] = {0};
    for (int i = 0; i < 4; i++)
        w[i * 5] = 1.0f;
    mb_init_f32(b, "W", 2, wd, w);
    mb_node(b, "MatMul", "matmul", "x,W", !strcmp(tail, "plain") ? "y" : "h");
    if (!strcmp(tail, "plain")) {
        /* y = h: the loss itself overflows on large inputs */
    } else if (!strcmp(tail, "log")) {
        mb_node(b, "Log", "log_node", "h", "y");
    } else { /* sqrt(h - h): 0 forward, -Inf in its gradient dY / (2Y) */
        mb_node(b, "Sub", "sub_node", "h,h", "z");
        mb_node(b, "Sqrt", "sqrt_node", "z", "y");
    }
    mb_output(b, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    assert_int_equal(mb_write(b, path), 0);
    mb_free(b);
}

static void write_data(void) {
    ot_error err = {0};
    int64_t d[2] = {4, 4};
    ot_shape sh = ot_shape_make(2, d);
    ot_tensor *x = ot_tensor_new(OT_F32, &sh), *t = ot_tensor_new(OT_F32, &sh);
    for (int i = 0; i < 16; i++) {
        ((float *)x->data)[i] = -1.0f - (float)i; /* Log of a negative: NaN */
        ((float *)t->data)[i] = 1.0f;
    }
    assert_int_equal(ot_npy_write(TMP "/nx.npy", x, &err), OT_OK);
    assert_int_equal(ot_npy_write(TMP "/nt.npy", t, &err), OT_OK);
    for (int i = 0; i < 16; i++)
        ((float *)x->data)[i] = 1e20f; /* finite, but its square is not */
    assert_int_equal(ot_npy_write(TMP "/big.npy", x, &err), OT_OK);
    ot_tensor_free(x);
    ot_tensor_free(t);
}

static void test_numerics_phases(void **state) {
    (void)state;
    write_model(TMP "/log.onnx", "log");
    write_model(TMP "/sqrt.onnx", "sqrt");
    write_data();
    const char *data = " --input " TMP "/nx.npy --labels " TMP "/nt.npy --loss mse --steps 3 --check-numerics";
    assert_int_equal(run(BIN " train " TMP "/log.onnx%s -o " TMP "/n.onnx", data), 10);
    expect_output("training step 1: node 'log_node' (Log, forward pass");
    assert_int_equal(run(BIN " train " TMP "/sqrt.onnx%s -o " TMP "/n.onnx", data), 10);
    expect_output("training step 1: node 'sqrt_node/grad");
    expect_output("backward pass");
    assert_false(exists(TMP "/n.onnx"));
    write_model(TMP "/plain.onnx", "plain");
    assert_int_equal(run(BIN " train " TMP "/plain.onnx --input " TMP "/big.npy --labels " TMP "/nt.npy --loss mse "
                             "--steps 2 -o " TMP "/n.onnx"),
                     10);
    expect_output("training step 1");
    expect_output("loss pass");
    /* a learning rate beyond float range: every gradient finite, the update is not */
    assert_int_equal(run(BIN " train " S "mlp.onnx --input " S "mlp/input.npy --labels " S "mlp/labels.npy --optimizer sgd --lr 1e39 "
                             "--steps 3 -o " TMP "/n.onnx"),
                     10);
    expect_output("training step 1: node 'fc1.weight/SgdStep' (SgdStep, optimizer pass");
    expect_output("param 'fc1.weight'");
    assert_int_equal(run(BIN " train " S "mlp.onnx --input " S "mlp/input.npy --labels " S "mlp/labels.npy --lr 1e39 "
                             "--optimizer adam --steps 3 -o " TMP "/n.onnx"),
                     10);
    expect_output("optimizer pass");
    /* with remat the forward Log still runs before its recompute clone: named as forward */
    assert_int_equal(run(BIN " train " TMP "/log.onnx%s --remat all -o " TMP "/n.onnx", data), 10);
    expect_output("forward pass");
    assert_false(exists(TMP "/n.onnx"));
    /* off: the run goes through (and NaN params are written) */
    assert_int_equal(run(BIN " train " TMP "/log.onnx --input " TMP "/nx.npy --labels " TMP "/nt.npy --loss mse "
                             "--steps 1 --no-check-numerics -o " TMP "/n.onnx"),
                     0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_damaged_refused),
        cmocka_unit_test(test_crafted_payloads),
        cmocka_unit_test(test_keep_and_latest),
        cmocka_unit_test(test_settings_differ),
        cmocka_unit_test(test_resume_bitwise_mlp),
        cmocka_unit_test(test_resume_bitwise_resnet),
        cmocka_unit_test(test_resume_bitwise_tinygpt),
        cmocka_unit_test(test_resume_refusals),
        cmocka_unit_test(test_cli_keep_and_help),
        cmocka_unit_test(test_sigterm_checkpoints_and_resumes),
        cmocka_unit_test(test_sigint_default_dir),
        cmocka_unit_test(test_numerics_phases),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
