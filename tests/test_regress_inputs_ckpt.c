/* test_regress_inputs_ckpt.c — regression tests for issue 18, checkpoints: crafted
 * files with a valid checksum (a step of -1 or INT64_MIN once overflowed the heap in
 * ot_data_gather on --resume; every other field too) are refused with OT_E_DATA naming
 * the file and the field; a FIFO given as --resume, or as the newest ckpt-*.otc of a
 * resume folder, is refused or skipped instead of blocking; and a FIFO or symlink
 * planted at a checkpoint's temporary name is never opened or followed. A hang kills
 * the binary (alarm), and every CLI run goes through `timeout 10` (124: a hang). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_run.h"
#include "train/checkpoint.h"

#define BIN OT_BINARY_DIR "/onnxtrain"
#define S OT_SOURCE_DIR "/samples/"
#define TMP OT_BINARY_DIR "/test_regress_inputs_ckpt_tmp"
#define MLP BIN " train " S "mlp.onnx --input " S "mlp/input.npy --labels " S "mlp/labels.npy --quiet --batch-size 4"
#define run(...) cli_run(TMP "/out.txt", __VA_ARGS__)
#define expect_output(needle) cli_expect_in(TMP "/out.txt", needle)

static int setup(void **state) {
    (void)state;
    mkdir(TMP, 0777);
    alarm(240); /* the whole file; each CLI run has its own 10 s */
    return 0;
}

/* A consistent checkpoint: 3 steps of 2 micro-batches, 35 samples in batches of 4
 * (8 per epoch), SGD, two tensors. */
static void make_ckpt(ot_checkpoint *c) {
    ot_error err = {0};
    memset(c, 0, sizeof *c);
    c->fingerprint = 42;
    c->step = 3;
    c->micro_batches = 6;
    c->epoch = 0;
    c->epoch_batch = 6;
    c->set.batch_size = 4;
    c->set.accum = 2;
    c->set.n_samples = 35;
    ot_optim_config_default(&c->set.optim, OT_OPTIM_SGD);
    snprintf(c->set.remat, sizeof c->set.remat, "none");
    int64_t d[2] = {2, 3};
    ot_shape sh = ot_shape_make(2, d);
    float w[6] = {1, 2, 3, 4, 5, 6};
    assert_int_equal(ot_checkpoint_add(c, "w", OT_CKPT_PARAM, OT_F32, &sh, w, sizeof w, &err), OT_OK);
    assert_int_equal(ot_checkpoint_add(c, "w.momentum", OT_CKPT_OPT_STATE, OT_F32, &sh, w, sizeof w, &err), OT_OK);
}

static void expect_decode(const ot_checkpoint *c, const char *field) {
    uint8_t *buf = NULL;
    size_t len = 0;
    ot_error err = {0};
    ot_checkpoint d;
    assert_int_equal(ot_checkpoint_encode(c, &buf, &len, &err), OT_OK);
    ot_status st = ot_checkpoint_decode(buf, len, "crafted.otc", &d, &err);
    free(buf);
    if (st != OT_E_DATA) fail_msg("field %s: expected OT_E_DATA, got %d: %s", field, st, err.msg);
    assert_non_null(strstr(err.msg, "crafted.otc"));
    if (!strstr(err.msg, field)) fail_msg("expected '%s' in: %s", field, err.msg);
    assert_int_equal(d.n_tensors, 0);
}

/* Each field set to a value the writer cannot produce, on an otherwise valid file
 * whose checksum matches. */
static void test_crafted_fields(void **state) {
    (void)state;
    ot_checkpoint c;
    make_ckpt(&c);
    uint8_t *buf = NULL;
    size_t len = 0;
    ot_error err = {0};
    ot_checkpoint d;
    assert_int_equal(ot_checkpoint_encode(&c, &buf, &len, &err), OT_OK);
    assert_int_equal(ot_checkpoint_decode(buf, len, "ok.otc", &d, &err), OT_OK);
    ot_checkpoint_free(&d);
    free(buf);
#define CASE(field, stmt)                                                                                              \
    do {                                                                                                               \
        ot_checkpoint x;                                                                                               \
        make_ckpt(&x);                                                                                                 \
        stmt;                                                                                                          \
        expect_decode(&x, field);                                                                                      \
        ot_checkpoint_free(&x);                                                                                        \
    } while (0)
    CASE("'step' is -1", x.step = -1);
    CASE("'step' is -9223372036854775808", (x.step = INT64_MIN, x.micro_batches = 0));
    CASE("'micro_batches'", x.micro_batches = 5);
    CASE("'micro_batches'", (x.step = INT64_MAX / 2 + 1, x.micro_batches = 0)); /* step x accum overflows */
    CASE("'epoch'", x.epoch = -1);
    CASE("'epoch_batch'", x.epoch_batch = 8);
    CASE("'batch_size'", x.set.batch_size = 0);
    CASE("'accum'", x.set.accum = -3);
    CASE("'n_samples'", x.set.n_samples = 3);
    CASE("'loss_kind'", x.set.loss_kind = 9);
    CASE("'optimizer'", x.set.optim.kind = (ot_optim_kind)7);
    CASE("'schedule'", x.set.optim.schedule = (ot_schedule_kind)5);
    CASE("'lr'", x.set.optim.lr = NAN);
    CASE("'eps'", x.set.optim.eps = INFINITY);
    CASE("'warmup_steps'", x.set.optim.warmup_steps = -1);
    CASE("'total_steps'", x.set.optim.total_steps = -1);
    CASE("'step' is 3, past the run's 2 steps", (x.set.optim.schedule = OT_SCHED_COSINE, x.set.optim.total_steps = 2));
    CASE("'memory_budget'", x.set.memory_budget = -1);
    CASE("'keep_partial'", (x.set.keep_partial = true, x.set.n_samples = 32)); /* 4 divides 32: no partial batch */
    CASE("'remat'", x.set.remat[1] = '\n');
    CASE("kind 5", x.tensors[1].kind = (ot_ckpt_kind)5);
    CASE("dtype 99", x.tensors[1].dtype = (ot_dtype)99);
    CASE("dtype 8", x.tensors[1].dtype = OT_STRING);
    CASE("'w' appears twice", x.tensors[1].name[1] = 0);
    CASE("name is empty", x.tensors[0].name[0] = 0);
    CASE("inconsistent dtype, shape and size", x.tensors[0].nbytes = 20);
#undef CASE
    ot_checkpoint_free(&c);
}

/* Damage the encoder cannot express: bytes changed in place, the checksum resealed. */
static void reseal(uint8_t *buf, size_t len) {
    uint64_t n = len - 32, sum = ot_fnv1a64(OT_FNV_OFFSET, buf + 32, len - 32);
    for (int i = 0; i < 8; i++) {
        buf[16 + i] = (uint8_t)(n >> (8 * i));
        buf[24 + i] = (uint8_t)(sum >> (8 * i));
    }
}

static void expect_bytes(uint8_t *buf, size_t len, const char *field) {
    ot_checkpoint d;
    ot_error err = {0};
    reseal(buf, len);
    ot_status st = ot_checkpoint_decode(buf, len, "bytes.otc", &d, &err);
    if (st != OT_E_DATA) fail_msg("%s: expected OT_E_DATA, got %d: %s", field, st, err.msg);
    if (!strstr(err.msg, field)) fail_msg("expected '%s' in: %s", field, err.msg);
}

static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void test_crafted_bytes(void **state) {
    (void)state;
    ot_checkpoint c;
    make_ckpt(&c);
    uint8_t *buf = NULL, *w;
    size_t len = 0;
    ot_error err = {0};
    assert_int_equal(ot_checkpoint_encode(&c, &buf, &len, &err), OT_OK);
    w = malloc(len);
    assert_non_null(w);
    /* the header's reserved u32 (bytes 12..15), not covered by the checksum */
    memcpy(w, buf, len);
    w[13] = 1;
    expect_bytes(w, len, "'reserved' of the header is 256");
    /* no_shuffle: payload = fingerprint, 4 x i64, then batch, accum, n_samples, seed */
    const size_t flags = 32 + 8 + 32 + 32;
    memcpy(w, buf, len);
    w[flags] = 4; /* bits 0 and 1 are flags (shuffling, the partial batch kept); 4 is none */
    expect_bytes(w, len, "'no_shuffle");
    memcpy(w, buf, len);
    w[flags] = 2; /* the partial batch kept: 35 samples in batches of 4, a valid file */
    reseal(w, len);
    ot_checkpoint kp;
    assert_int_equal(ot_checkpoint_decode(w, len, "bytes.otc", &kp, &err), OT_OK);
    assert_true(kp.set.keep_partial && !kp.set.no_shuffle);
    ot_checkpoint_free(&kp);
    /* the tensor count: after the settings (140 bytes with remat "none") */
    const size_t count_at = 32 + 8 + 32 + 140;
    assert_memory_equal(buf + count_at, "\x02\x00\x00\x00", 4);
    memcpy(w, buf, len);
    memcpy(w + count_at, "\xff\xff\xff\x7f", 4);
    expect_bytes(w, len, "'tensor count' is 2147483647");
    /* a negative dim in the first record: u32 count, u32 len, "w", kind, dtype, rank, dims */
    size_t dim0 = count_at + 4 + 4 + 1 + 4 + 4 + 4;
    memcpy(w, buf, len);
    put64(w + dim0, (uint64_t)-2);
    expect_bytes(w, len, "negative dim -2");
    /* a shape whose byte size wraps to the stored 24: (2^62 + 6) x 1 float32s = 2^64 + 24 bytes */
    memcpy(w, buf, len);
    put64(w + dim0, (1ull << 62) + 6);
    put64(w + dim0 + 8, 1);
    expect_bytes(w, len, "inconsistent dtype, shape and size");
    free(w);
    free(buf);
    ot_checkpoint_free(&c);
}

/* The committed fixtures (tests/fixtures/regress/make_inputs.py, also fuzz seeds): the
 * valid one reads, each crafted one is refused naming its field. */
static void test_fixtures(void **state) {
    (void)state;
    const struct {
        const char *file, *needle;
    } cases[] = {
        {"ckpt_step_minus1.otc", "field 'step' is -1"},
        {"ckpt_step_int64_min.otc", "field 'step' is -9223372036854775808"},
        {"ckpt_position_lies.otc", "field 'epoch' is 1"},
        {"ckpt_reserved.otc", "field 'reserved' of the header is 7"},
        {"ckpt_count_huge.otc", "field 'tensor count' is 2147483647"},
        {"ckpt_size_wraps.otc", "tensor 'w': inconsistent dtype, shape and size"},
    };
    ot_checkpoint c;
    ot_error err = {0};
    assert_int_equal(ot_checkpoint_read(OT_SOURCE_DIR "/tests/fixtures/regress/ckpt_valid.otc", &c, &err), OT_OK);
    assert_int_equal(c.step, 3);
    assert_int_equal(c.n_tensors, 1);
    ot_checkpoint_free(&c);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/tests/fixtures/regress/%s", OT_SOURCE_DIR, cases[i].file);
        ot_status st = ot_checkpoint_read(p, &c, &err);
        if (st != OT_E_DATA) fail_msg("%s: expected OT_E_DATA, got %d: %s", cases[i].file, st, err.msg);
        if (!strstr(err.msg, cases[i].file) || !strstr(err.msg, cases[i].needle))
            fail_msg("%s: expected '%s' in: %s", cases[i].file, cases[i].needle, err.msg);
    }
}

/* ---- through the CLI --------------------------------------------------------------- */

static void make_fifo(const char *path) {
    unlink(path);
    assert_int_equal(mkfifo(path, 0600), 0);
}

/* Rewrites TMP/run/ckpt-4.otc into `out` with its step set to `step` (sealed: the
 * checksum matches). */
static void craft_step(const char *out, int64_t step) {
    ot_checkpoint c;
    ot_error err = {0};
    assert_int_equal(ot_checkpoint_read(TMP "/run/ckpt-4.otc", &c, &err), OT_OK);
    c.step = step;
    assert_int_equal(ot_checkpoint_write(&c, out, &err), OT_OK);
    ot_checkpoint_free(&c);
}

static void test_cli_crafted_step_and_fifos(void **state) {
    (void)state;
    assert_int_equal(
        run("timeout 60 %s --steps 4 --checkpoint-dir " TMP "/run --checkpoint-every 2 -o " TMP "/r.onnx", MLP), 0);
    const int64_t steps[] = {-1, INT64_MIN};
    for (int i = 0; i < 2; i++) {
        craft_step(TMP "/bad.otc", steps[i]);
        int rc = run("timeout 10 %s --steps 8 --resume " TMP "/bad.otc -o " TMP "/r2.onnx", MLP);
        if (rc != 8) fail_msg("step %lld: exit %d, expected 8", (long long)steps[i], rc);
        expect_output(TMP "/bad.otc: field 'step' is -");
        assert_int_equal(access(TMP "/r2.onnx", F_OK), -1);
    }
    /* --resume FIFO: exit 3 at once */
    make_fifo(TMP "/fifo.otc");
    assert_int_equal(run("timeout 10 %s --steps 8 --resume " TMP "/fifo.otc -o " TMP "/r2.onnx", MLP), 3);
    expect_output("checkpoint " TMP "/fifo.otc: not a regular file (a FIFO)");
    /* a FIFO as the newest ckpt-*.otc of the folder: skipped, with a note, for ckpt-4 */
    make_fifo(TMP "/run/ckpt-9.otc");
    assert_int_equal(run("timeout 20 %s --steps 6 --resume " TMP "/run -o " TMP "/r2.onnx", MLP), 0);
    expect_output("skipped a newer checkpoint: checkpoint " TMP "/run/ckpt-9.otc: not a regular file (a FIFO)");
    assert_int_equal(access(TMP "/r2.onnx", F_OK), 0);
    unlink(TMP "/r2.onnx");
    /* only FIFOs in the folder: refused, exit 3 */
    mkdir(TMP "/fifos", 0777);
    make_fifo(TMP "/fifos/ckpt-2.otc");
    assert_int_equal(run("timeout 10 %s --steps 6 --resume " TMP "/fifos -o " TMP "/r2.onnx", MLP), 3);
    expect_output("no readable checkpoint; the newest: checkpoint " TMP "/fifos/ckpt-2.otc: not a regular file");
}

/* ---- planted temporary names ------------------------------------------------------- */

/* A symlink (and a FIFO) planted at ckpt-N.otc.tmp and at ckpt-N.otc.tmp-XXXXXX names
 * in the checkpoint folder: never followed or opened; the link target is unchanged and
 * the checkpoint is written as a regular file of its own. */
static void test_planted_temporary_names(void **state) {
    (void)state;
    const char *dir = TMP "/plant";
    mkdir(dir, 0777);
    FILE *f = fopen(TMP "/target.txt", "w");
    assert_non_null(f);
    fputs("sentinel", f);
    fclose(f);
    const char *links[] = {"ckpt-2.otc.tmp", "ckpt-2.otc.tmp-AAAAAA", "ckpt-2.otc.tmp-000000",
                           "ckpt-4.otc.tmp", "ckpt-4.otc.tmp-zzzzzz", "ckpt-3.otc.tmp-AAAAAA"};
    char p[600];
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, links[i]);
        unlink(p);
        assert_int_equal(symlink(TMP "/target.txt", p), 0);
    }
    /* FIFOs at the temporary names: opening one for writing would block without a reader */
    const char *fifos[] = {"ckpt-3.otc.tmp", "ckpt-2.otc.tmp-fifo00", "ckpt-4.otc.tmp-BBBBBB"};
    for (size_t i = 0; i < sizeof fifos / sizeof fifos[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, fifos[i]);
        make_fifo(p);
    }
    /* the library */
    ot_checkpoint c;
    make_ckpt(&c);
    ot_error err = {0};
    char written[600];
    assert_int_equal(ot_checkpoint_save_dir(&c, dir, 3, written, sizeof written, &err), OT_OK);
    ot_checkpoint_free(&c);
    /* the CLI, writing ckpt-2 and ckpt-4 */
    assert_int_equal(
        run("timeout 60 %s --steps 4 --checkpoint-dir %s --checkpoint-every 2 -o " TMP "/p.onnx", MLP, dir), 0);
    char *t = cli_slurp(TMP "/target.txt");
    assert_non_null(t);
    assert_string_equal(t, "sentinel");
    free(t);
    struct stat sb;
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, links[i]);
        assert_int_equal(lstat(p, &sb), 0);
        assert_true(S_ISLNK(sb.st_mode));
    }
    const char *ckpts[] = {"ckpt-2.otc", "ckpt-3.otc", "ckpt-4.otc"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, ckpts[i]);
        assert_int_equal(lstat(p, &sb), 0);
        assert_true(S_ISREG(sb.st_mode));
        assert_int_equal(sb.st_nlink, 1);
    }
    snprintf(p, sizeof p, "%s/ckpt-4.otc", dir);
    assert_int_equal(ot_checkpoint_read(p, &c, &err), OT_OK);
    assert_int_equal(c.step, 4);
    ot_checkpoint_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crafted_fields),
        cmocka_unit_test(test_crafted_bytes),
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_cli_crafted_step_and_fifos),
        cmocka_unit_test(test_planted_temporary_names),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
