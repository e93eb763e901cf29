/* test_export_stream.c — the tuned model and checkpoints written from a source of
 * bytes instead of from memory the writer owns (what a GPU run does: the weights stay
 * in device memory and are read through a bounded staging buffer). On the CPU the
 * trainer reads the arena in place, so these tests are what exercises the staging
 * path: the bytes must equal those of the in-memory writers, reads must stay within
 * OT_EXPORT_STAGE_BYTES / OT_CKPT_STAGE_BYTES, and a read that fails midway must leave
 * no file behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixtures/onnx_builder.h"
#include "importer/importer.h"
#include "kernels/kernel.h"
#include "train/checkpoint.h"

#define TMP OT_BINARY_DIR "/test_export_stream_tmp"
enum { ROWS = 1200, COLS = 1100 }; /* 5.3 MB: more than one staging buffer */

static uint8_t *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*len ? *len : 1);
    if (fread(b, 1, *len, f) != *len) {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

static int files_in(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

static void clean(void) {
    DIR *d = opendir(TMP);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char p[600];
        snprintf(p, sizeof p, TMP "/%s", e->d_name);
        unlink(p);
    }
    if (d) closedir(d);
    mkdir(TMP, 0777);
}

/* y = x · W + b, W big enough to need several staging buffers. */
static void write_model(const char *path) {
    mb *b = mb_new(13);
    float *w = malloc(sizeof(float) * ROWS * COLS);
    for (size_t i = 0; i < (size_t)ROWS * COLS; i++) w[i] = (float)(i % 977) / 977.0f - 0.5f;
    float bias[COLS];
    for (int i = 0; i < COLS; i++) bias[i] = (float)i / 8;
    int64_t wd[2] = {ROWS, COLS}, bd[1] = {COLS}, xd[2] = {-1, ROWS};
    const char *syms[2] = {"batch", NULL};
    mb_init_f32(b, "W", 2, wd, w);
    mb_init_f32(b, "b", 1, bd, bias);
    mb_input(b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, xd, syms);
    mb_output(b, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    mb_node(b, "MatMul", "mm", "x,W", "h");
    mb_node(b, "Add", "add", "h,b", "y");
    assert_int_equal(mb_write(b, path), 0);
    free(w);
    mb_free(b);
}

/* The source: the bytes moved out of the IR, read chunk by chunk; fails on read
 * number fail_at (0: never). */
typedef struct side {
    void **data;
    size_t *nbytes;
    int reads, fail_at;
    size_t largest;
} side;

static ot_status side_read(void *user, int v, uint64_t off, void *dst, size_t n, ot_error *err) {
    side *s = user;
    if (++s->reads == s->fail_at) return ot_fail(err, OT_E_IO, "injected failure reading value %d", v);
    if (n > s->largest) s->largest = n;
    assert_true(off + n <= s->nbytes[v]);
    memcpy(dst, (const uint8_t *)s->data[v] + off, n);
    return OT_OK;
}

static void test_model_from_source(void **state) {
    (void)state;
    clean();
    ot_error err = {0};
    write_model(TMP "/src.onnx");
    ot_import_options io = {.fold_eval = ot_cpu_fold_eval};
    ot_model *m = NULL;
    if (ot_model_load(TMP "/src.onnx", &io, &m, &err)) fail_msg("%s", err.msg);
    assert_int_equal(ot_model_save(m, TMP "/plain.onnx", &err), OT_OK);
    ot_graph *g = m->graph;
    side s = {.data = calloc((size_t)g->n_values, sizeof(void *)), .nbytes = calloc((size_t)g->n_values, sizeof(size_t))};
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].init_index >= 0) {
            s.data[v] = g->values[v].data;
            s.nbytes[v] = g->values[v].nbytes;
            g->values[v].data = NULL; /* as after an executor released it */
        }
    ot_export_source src = {.read = side_read, .user = &s};
    ot_export_options eo = {.source = &src};
    assert_int_equal(ot_model_save_ex(m, TMP "/streamed.onnx", &eo, &err), OT_OK);
    assert_true(s.reads >= 3); /* W in two chunks at least, and b */
    assert_true(s.largest <= OT_EXPORT_STAGE_BYTES);
    size_t la = 0, lb = 0;
    uint8_t *a = read_all(TMP "/plain.onnx", &la), *b = read_all(TMP "/streamed.onnx", &lb);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la);
    free(a);
    free(b);

    /* external data, from the source: read back equal */
    eo.external_data = true;
    assert_int_equal(ot_model_save_ex(m, TMP "/ext.onnx", &eo, &err), OT_OK);
    ot_model *e = NULL;
    assert_int_equal(ot_model_load(TMP "/ext.onnx", &io, &e, &err), OT_OK);
    for (int v = 0; v < e->graph->n_values; v++)
        if (e->graph->values[v].init_index >= 0) {
            int w = ot_graph_find_value(g, e->graph->values[v].name);
            assert_true(w >= 0);
            assert_int_equal(e->graph->values[v].nbytes, s.nbytes[w]);
            assert_memory_equal(e->graph->values[v].data, s.data[w], s.nbytes[w]);
        }
    ot_model_free(e);

    /* a read failing midway: neither file appears, no temporary is left */
    int before = files_in(TMP);
    for (int fail_at = 1; fail_at <= 3; fail_at++) {
        s.reads = 0;
        s.fail_at = fail_at;
        assert_int_equal(ot_model_save_ex(m, TMP "/failed.onnx", &eo, &err), OT_E_IO);
        assert_non_null(strstr(err.msg, "injected failure"));
        assert_int_equal(files_in(TMP), before);
    }
    for (int v = 0; v < g->n_values; v++)
        if (s.data[v]) g->values[v].data = s.data[v];
    free(s.data);
    free(s.nbytes);
    ot_model_free(m);
}

/* ---- checkpoints ------------------------------------------------------------------ */

typedef struct ck_side {
    const void *data[2];
    int reads, fail_at;
    size_t largest;
} ck_side;

static ot_status ck_read(void *user, int i, uint64_t off, void *dst, size_t n, ot_error *err) {
    ck_side *s = user;
    if (++s->reads == s->fail_at) return ot_fail(err, OT_E_IO, "injected failure reading tensor %d", i);
    if (n > s->largest) s->largest = n;
    memcpy(dst, (const uint8_t *)s->data[i] + off, n);
    return OT_OK;
}

static void test_checkpoint_from_source(void **state) {
    (void)state;
    clean();
    ot_error err = {0};
    size_t n0 = sizeof(float) * ROWS * COLS;
    float *w = malloc(n0);
    for (size_t i = 0; i < (size_t)ROWS * COLS; i++) w[i] = (float)i * 0.25f;
    double m[3] = {1.5, -2, 3};
    int64_t d[2] = {ROWS, COLS}, d1[1] = {3};
    ot_shape sw = ot_shape_make(2, d), sm = ot_shape_make(1, d1);
    ot_checkpoint a = {0}, b = {0};
    a.fingerprint = b.fingerprint = 42;
    a.step = b.step = 7;
    snprintf(a.set.remat, sizeof a.set.remat, "none");
    b.set = a.set;
    assert_int_equal(ot_checkpoint_add(&a, "W", OT_CKPT_PARAM, OT_F32, &sw, w, n0, &err), OT_OK);
    assert_int_equal(ot_checkpoint_add(&a, "m", OT_CKPT_OPT_STATE, OT_F64, &sm, m, sizeof m, &err), OT_OK);
    assert_int_equal(ot_checkpoint_add_ref(&b, "W", OT_CKPT_PARAM, OT_F32, &sw, n0, &err), OT_OK);
    assert_int_equal(ot_checkpoint_add_ref(&b, "m", OT_CKPT_OPT_STATE, OT_F64, &sm, sizeof m, &err), OT_OK);
    ck_side s = {.data = {w, m}};
    b.source = (ot_ckpt_source){.read = ck_read, .user = &s};
    uint8_t *enc = NULL;
    size_t len = 0;
    assert_int_equal(ot_checkpoint_encode(&a, &enc, &len, &err), OT_OK);
    assert_int_equal(ot_checkpoint_encode(&b, &enc, &len, &err) == OT_E_INTERNAL, 1); /* no data to encode */
    assert_int_equal(ot_checkpoint_write(&b, TMP "/b.otc", &err), OT_OK);
    assert_true(s.largest <= OT_CKPT_STAGE_BYTES);
    assert_true(s.reads >= 6); /* two passes, W in two chunks at least */
    size_t lf = 0;
    uint8_t *file = read_all(TMP "/b.otc", &lf);
    assert_non_null(file);
    assert_int_equal(lf, len);
    assert_memory_equal(file, enc, len);
    free(file);
    free(enc);
    for (int fail_at = 1; fail_at <= 6; fail_at += 5) { /* in the checksum pass; in the writing pass */
        s.reads = 0;
        s.fail_at = fail_at;
        assert_int_equal(ot_checkpoint_write(&b, TMP "/c.otc", &err), OT_E_IO);
        assert_non_null(strstr(err.msg, "injected failure"));
        assert_int_equal(files_in(TMP), 1);
    }
    ot_checkpoint_free(&a);
    ot_checkpoint_free(&b);
    free(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_from_source),
        cmocka_unit_test(test_checkpoint_from_source),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
