/* test_kernels_cpu_xfmr.c — the transformer speed paths (issue 14) give the same bits
 * as the plain rules they replace: the tiled 4-byte Transpose against an element-by-
 * element reference on shapes that are not multiples of the tile, for the permutations
 * a GPT exports (weights [1,0], attention [0,2,1,3] and [0,2,3,1]) and others, on one
 * and two threads. */
#include "test_kernels_cpu_util.h"

/* y = transpose(x, perm) element by element: the definition, with no tiling. */
static void transpose_ref(const float *x, float *y, int r, const int64_t *xd, const int64_t *perm) {
    int64_t xs[8], n = 1;
    for (int d = r - 1; d >= 0; d--) xs[d] = n, n *= xd[d];
    for (int64_t i = 0; i < n; i++) {
        int64_t q = i, off = 0;
        for (int d = r - 1; d >= 0; d--) {
            int64_t yd = xd[perm[d]];
            off += (q % yd) * xs[perm[d]];
            q /= yd;
        }
        y[i] = x[off];
    }
}

static void check_transpose(int r, const int64_t *xd, const int64_t *perm, int threads) {
    int64_t n = 1;
    for (int d = 0; d < r; d++) n *= xd[d];
    float *x = malloc((size_t)n * sizeof(float)), *y = malloc((size_t)n * sizeof(float));
    float *want = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = (float)i * 0.5f - 7.0f;
    transpose_ref(x, want, r, xd, perm);
    ot_node node = tk_node(OT_OP_TRANSPOSE, 1, 1);
    ot_node_set_attr_ints(&node, "perm", perm, r);
    int64_t yd[8];
    for (int d = 0; d < r; d++) yd[d] = xd[perm[d]];
    ot_tensor in[1] = {tk_t(OT_F32, x, 0)}, out[1] = {tk_t(OT_F32, y, 0)};
    in[0].shape = ot_shape_make(r, xd);
    out[0].shape = ot_shape_make(r, yd);
    in[0].nbytes = out[0].nbytes = (size_t)n * sizeof(float);
    memset(y, 0xff, (size_t)n * sizeof(float));
    assert_int_equal(tk_run_ex(&node, in, out, threads, 0, 0, 0, NULL), OT_OK);
    assert_memory_equal(y, want, (size_t)n * sizeof(float));
    tk_node_free(&node);
    free(x);
    free(y);
    free(want);
}

static void test_transpose_tiled(void **state) {
    (void)state;
    for (int threads = 1; threads <= 2; threads++) {
        check_transpose(2, (int64_t[]){77, 301}, (int64_t[]){1, 0}, threads);     /* a Linear weight */
        check_transpose(2, (int64_t[]){32, 64}, (int64_t[]){1, 0}, threads);      /* whole tiles */
        check_transpose(2, (int64_t[]){1, 40}, (int64_t[]){1, 0}, threads);       /* a row */
        check_transpose(4, (int64_t[]){3, 45, 5, 33}, (int64_t[]){0, 2, 3, 1}, threads); /* keys */
        check_transpose(4, (int64_t[]){3, 45, 5, 33}, (int64_t[]){0, 2, 1, 3}, threads); /* rows move whole */
        check_transpose(4, (int64_t[]){2, 3, 37, 35}, (int64_t[]){0, 1, 3, 2}, threads);
        check_transpose(3, (int64_t[]){33, 7, 65}, (int64_t[]){2, 0, 1}, threads);
        check_transpose(3, (int64_t[]){33, 7, 65}, (int64_t[]){1, 2, 0}, threads);
        check_transpose(3, (int64_t[]){5, 70, 1}, (int64_t[]){2, 1, 0}, threads); /* unit last axis */
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transpose_tiled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
