/* test_kernels_cpu_select.c — ops batch 4's CPU kernels against plain C references:
 * Einsum (batched matmul, the diagonal, an ellipsis broadcast, float64) and EinsumGrad
 * (onto a repeated label, onto a broadcast dim), TopK (ties by the lower index, NaN on
 * top, smallest, the same on 1 and 4 threads), OneHot (negative and out-of-range
 * indices, float indices, int64 values, a middle axis), Size; and the bad inputs each
 * refuses with a status naming the node; the recurrent ops' bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel.h"
#include "test_kernels_cpu_util.h"

static void einsum_run(const char *eq, ot_tensor *in, int n_in, ot_tensor *out, ot_status want) {
    ot_node n = tk_node(OT_OP_EINSUM, n_in, 1);
    ot_node_set_attr_string(&n, "equation", eq);
    ot_status st = tk_run(&n, in, out);
    if (st != want) fail_msg("Einsum \"%s\": status %d, want %d", eq, st, want);
    tk_node_free(&n);
}

static void test_einsum(void **state) {
    (void)state;
    float a[24], b[40], y[30], want[30];
    for (int i = 0; i < 24; i++)
        a[i] = (float)((i * 7) % 11) - 5.0f;
    for (int i = 0; i < 40; i++)
        b[i] = (float)((i * 5) % 9) * 0.5f - 2.0f;
    /* bij,bjk->bik over [2,3,4] x [2,4,5] */
    for (int bb = 0; bb < 2; bb++)
        for (int i = 0; i < 3; i++)
            for (int k = 0; k < 5; k++) {
                double s = 0;
                for (int j = 0; j < 4; j++)
                    s += (double)a[bb * 12 + i * 4 + j] * b[bb * 20 + j * 5 + k];
                want[bb * 15 + i * 5 + k] = (float)s;
            }
    ot_tensor in[3] = {tk_t(OT_F32, a, 3, 2, 3, 4), tk_t(OT_F32, b, 3, 2, 4, 5)};
    ot_tensor out[1] = {tk_t(OT_F32, y, 3, 2, 3, 5)};
    einsum_run("bij,bjk->bik", in, 2, out, OT_OK);
    assert_memory_equal(y, want, sizeof(float) * 30);
    /* the diagonal of a [3, 3] (the first 9 of a) */
    in[0] = tk_t(OT_F32, a, 2, 3, 3);
    out[0] = tk_t(OT_F32, y, 1, 3);
    einsum_run("ii->i", in, 1, out, OT_OK);
    assert_true(y[0] == a[0] && y[1] == a[4] && y[2] == a[8]);
    /* "...": a [1, 2, 3] against a [4, 3, 2] (batch 1 broadcast), implicit output */
    in[0] = tk_t(OT_F32, a, 3, 1, 2, 3);
    in[1] = tk_t(OT_F32, b, 3, 4, 3, 2);
    out[0] = tk_t(OT_F32, y, 3, 4, 2, 2);
    einsum_run("...ij,...jk", in, 2, out, OT_OK);
    for (int bb = 0; bb < 4; bb++)
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 2; k++) {
                double s = 0;
                for (int j = 0; j < 3; j++)
                    s += (double)a[i * 3 + j] * b[bb * 6 + j * 2 + k];
                assert_true(y[bb * 4 + i * 2 + k] == (float)s);
            }
    /* float64, as ONNX's node tests */
    double ad[6] = {1, 2, 3, 4, 5, 6}, yd[1];
    in[0] = tk_t(OT_F64, ad, 1, 6);
    in[1] = tk_t(OT_F64, ad, 1, 6);
    out[0] = tk_t(OT_F64, yd, 0);
    einsum_run("i,i", in, 2, out, OT_OK);
    assert_true(yd[0] == 91.0);
    /* bad input: a letter twice in the output, terms not matching the ranks, dims that
     * disagree, dtypes that differ */
    in[0] = tk_t(OT_F32, a, 2, 3, 4);
    in[1] = tk_t(OT_F32, b, 2, 5, 4);
    out[0] = tk_t(OT_F32, y, 2, 3, 5);
    einsum_run("ij,kj->ii", in, 2, out, OT_E_MODEL);
    einsum_run("ijk,kj->ik", in, 2, out, OT_E_MODEL);
    einsum_run("ij,jk->ik", in, 2, out, OT_E_SHAPE);
    in[1] = tk_t(OT_F64, ad, 2, 2, 3);
    einsum_run("ij,kj->ik", in, 2, out, OT_E_UNSUPPORTED);
}

static void test_einsum_grad(void **state) {
    (void)state;
    /* "ii->i": dX is dY on the diagonal, 0 elsewhere */
    float dy[3] = {1, 2, 3}, x[9] = {0}, dx[9];
    ot_node n = tk_node(OT_OP_EINSUM_GRAD, 2, 1);
    ot_node_set_attr_string(&n, "equation", "ii->i");
    ot_tensor in[3] = {tk_t(OT_F32, dy, 1, 3), tk_t(OT_F32, x, 2, 3, 3)}, out[1] = {tk_t(OT_F32, dx, 2, 3, 3)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    float want[9] = {1, 0, 0, 0, 2, 0, 0, 0, 3};
    assert_memory_equal(dx, want, sizeof want);
    tk_node_free(&n);
    /* "...i,...i->...": X_0 [1, 2] broadcast against X_1 [3, 2]: dX_0 sums over the 3 */
    float g3[3] = {1, -1, 2}, x0[2] = {5, 6}, x1[6] = {1, 2, 3, 4, 5, 6}, d0[2];
    n = tk_node(OT_OP_EINSUM_GRAD, 3, 1);
    ot_node_set_attr_string(&n, "equation", "...i,...i->...");
    ot_node_set_attr_int(&n, "index", 0);
    ot_tensor gi[3] = {tk_t(OT_F32, g3, 1, 3), tk_t(OT_F32, x0, 2, 1, 2), tk_t(OT_F32, x1, 2, 3, 2)};
    ot_tensor go[1] = {tk_t(OT_F32, d0, 2, 1, 2)};
    assert_int_equal(tk_run(&n, gi, go), OT_OK);
    assert_true(d0[0] == 1 * 1 - 1 * 3 + 2 * 5 && d0[1] == 1 * 2 - 1 * 4 + 2 * 6);
    ot_node_set_attr_int(&n, "index", 2); /* no third operand */
    assert_int_equal(tk_run(&n, gi, go), OT_E_MODEL);
    tk_node_free(&n);
}

/* TopK over [2, 5] along axis 1 with K = 3. */
static void top_k(const float *x, int largest, float *v, int64_t *ix, int threads) {
    int64_t k = 3;
    float xc[10];
    memcpy(xc, x, sizeof xc);
    ot_node n = tk_node(OT_OP_TOP_K, 2, 2);
    ot_node_set_attr_int(&n, "axis", 1);
    ot_node_set_attr_int(&n, "largest", largest);
    ot_tensor in[2] = {tk_t(OT_F32, xc, 2, 2, 5), tk_t(OT_I64, &k, 1, 1)};
    ot_tensor out[2] = {tk_t(OT_F32, v, 2, 2, 3), tk_t(OT_I64, ix, 2, 2, 3)};
    assert_int_equal(tk_run_ex(&n, in, out, threads, 0, 0, 0, NULL), OT_OK);
    tk_node_free(&n);
}

static void test_top_k(void **state) {
    (void)state;
    float x[10] = {1, 3, 3, 0, 2, NAN, 5, -1, NAN, 5}, v[6], v4[6];
    int64_t ix[6], ix4[6];
    top_k(x, 1, v, ix, 1);
    /* ties: the lower index first; NaN above every number */
    int64_t want_l[6] = {1, 2, 4, 0, 3, 1};
    assert_memory_equal(ix, want_l, sizeof want_l);
    assert_true(v[0] == 3 && v[1] == 3 && v[2] == 2 && isnan(v[3]) && isnan(v[4]) && v[5] == 5);
    top_k(x, 0, v, ix, 1);
    int64_t want_s[6] = {3, 0, 4, 2, 1, 4};
    assert_memory_equal(ix, want_s, sizeof want_s);
    top_k(x, 0, v4, ix4, 4);
    assert_memory_equal(ix, ix4, sizeof ix);
    /* K past the axis, a K of two elements: refused */
    int64_t k2[2] = {9, 1};
    ot_node n = tk_node(OT_OP_TOP_K, 2, 2);
    ot_tensor in[2] = {tk_t(OT_F32, x, 2, 2, 5), tk_t(OT_I64, k2, 1, 1)};
    ot_tensor out[2] = {tk_t(OT_F32, v, 2, 2, 3), tk_t(OT_I64, ix, 2, 2, 3)};
    assert_int_equal(tk_run(&n, in, out), OT_E_SHAPE);
    in[1] = tk_t(OT_I64, k2, 1, 2);
    assert_int_equal(tk_run(&n, in, out), OT_E_MODEL);
    tk_node_free(&n);
}

static void test_one_hot(void **state) {
    (void)state;
    /* indices [2, 2] with depth 3 at axis 1: out [2, 3, 2]; -1 is 2, 3 and -4 are off */
    int64_t ind[4] = {0, -1, 3, -4}, depth = 3, vals[2] = {7, 9}, y[12];
    ot_node n = tk_node(OT_OP_ONE_HOT, 3, 1);
    ot_node_set_attr_int(&n, "axis", 1);
    ot_tensor in[3] = {tk_t(OT_I64, ind, 2, 2, 2), tk_t(OT_I64, &depth, 0), tk_t(OT_I64, vals, 1, 2)};
    ot_tensor out[1] = {tk_t(OT_I64, y, 3, 2, 3, 2)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    int64_t want[12] = {9, 7, 7, 7, 7, 9, 7, 7, 7, 7, 7, 7};
    assert_memory_equal(y, want, sizeof want);
    /* float indices (truncated), float32 values, the last axis; NaN is off */
    float fi[3] = {1.7f, NAN, -1.0f}, fd = 2.0f, fv[2] = {0, 1}, fy[6];
    ot_node m = tk_node(OT_OP_ONE_HOT, 3, 1);
    ot_tensor fin[3] = {tk_t(OT_F32, fi, 1, 3), tk_t(OT_F32, &fd, 0), tk_t(OT_F32, fv, 1, 2)};
    ot_tensor fout[1] = {tk_t(OT_F32, fy, 2, 3, 2)};
    assert_int_equal(tk_run(&m, fin, fout), OT_OK);
    float fwant[6] = {0, 1, 0, 0, 0, 1};
    assert_memory_equal(fy, fwant, sizeof fwant);
    /* depth 0, values of three: refused */
    float zero = 0;
    fin[1] = tk_t(OT_F32, &zero, 0);
    assert_int_equal(tk_run(&m, fin, fout), OT_E_MODEL);
    tk_node_free(&m);
    in[2] = tk_t(OT_I64, want, 1, 3);
    assert_int_equal(tk_run(&n, in, out), OT_E_MODEL);
    tk_node_free(&n);
}

static void test_size(void **state) {
    (void)state;
    int64_t y = -1;
    ot_node n = tk_node(OT_OP_SIZE, 1, 1);
    ot_tensor in[1] = {tk_t(OT_F32, NULL, 3, 2, 3, 4)}, out[1] = {tk_t(OT_I64, &y, 0)};
    assert_int_equal(tk_run(&n, in, out), OT_OK); /* reads the shape only: no data needed */
    assert_int_equal(y, 24);
    tk_node_free(&n);
}

/* RNN / LSTM bad input: a length past the sequence, clip, activations other than
 * ONNX's defaults, a hidden_size W does not hold: refused, naming the node. */
static void test_rnn_bad_input(void **state) {
    (void)state;
    float x[6] = {0}, w[4] = {0}, r[4] = {0}, y[12], yh[4];
    int32_t lens[2] = {3, 4};
    ot_tensor absent;
    memset(&absent, 0, sizeof absent);
    ot_node n = tk_node(OT_OP_RNN, 5, 2);
    ot_tensor in[5] = {tk_t(OT_F32, x, 3, 3, 2, 1), tk_t(OT_F32, w, 3, 1, 2, 1), tk_t(OT_F32, r, 3, 1, 2, 2), absent,
                       tk_t(OT_I32, lens, 1, 2)};
    ot_tensor out[2] = {tk_t(OT_F32, y, 4, 3, 1, 2, 2), tk_t(OT_F32, yh, 3, 1, 2, 2)};
    ot_error e = {0};
    assert_int_equal(tk_run_ex(&n, in, out, 1, 0, 0, 0, &e), OT_E_MODEL);
    assert_non_null(strstr(e.msg, "sequence_lens[1] = 4 outside [0, 3]"));
    lens[1] = 3;
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    ot_node_set_attr_float(&n, "clip", 5.0f);
    assert_int_equal(tk_run(&n, in, out), OT_E_UNSUPPORTED);
    tk_node_free(&n);
    n = tk_node(OT_OP_RNN, 5, 2);
    const char *acts[1] = {"Sigmoid"};
    ot_node_set_attr_strings(&n, "activations", acts, 1);
    assert_int_equal(tk_run(&n, in, out), OT_E_UNSUPPORTED);
    tk_node_free(&n);
    n = tk_node(OT_OP_RNN, 5, 2);
    ot_node_set_attr_int(&n, "hidden_size", 3);
    assert_int_equal(tk_run(&n, in, out), OT_E_SHAPE);
    tk_node_free(&n);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_einsum),  cmocka_unit_test(test_einsum_grad), cmocka_unit_test(test_top_k),
        cmocka_unit_test(test_one_hot), cmocka_unit_test(test_size),        cmocka_unit_test(test_rnn_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
