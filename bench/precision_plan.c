/* precision_plan.c — the planned kept-activation + transient bytes of one training
 * step in float32 and under --precision bf16 (issue 27's memory target), for a model
 * at a batch: with the CPU's own op table (what `onnxtrain plan --precision bf16`
 * plans today), with a stand-in for low-precision GEMM/convolution kernels alone (the
 * other ops with low values run in float32 with casts), and with one that answers
 * "has a low-precision kernel" for every node the rewrite asks about (element
 * kernels too). Plan-only sessions: nothing runs, the weights are not read.
 *   bench/precision_plan.sh MODEL.onnx BATCH [REMAT]
 * PRECISION_PLAN_TOP=1 also lists the transient values over 4 MiB live at each peak
 * (with PRECISION_PLAN_KEPT=1 the kept ones), with producer and readers.
 * PRECISION_PLAN_FUSED_ATTN=on|auto plans every row with --fused-attention. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel.h"
#include "train/train.h"

static bool every_kernel(void *ctx, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)ctx, (void)node, (void)in, (void)out;
    return true;
}

/* What the low-precision GEMM/convolution kernels alone give: the low list, casts and
 * data movement run low; every other op with a low value does not. */
static bool gemm_kernels(void *ctx, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)ctx;
    if (ot_autocast_op_list(node->op) > 0 || node->op == OT_OP_CAST || ot_op_has(node->op, OT_T_VIEW) ||
        ot_op_has(node->op, OT_T_LAYOUT))
        return true;
    for (int i = 0; i < node->n_inputs; i++)
        if (in[i].dtype == OT_BF16 || in[i].dtype == OT_F16) return false;
    for (int i = 0; i < node->n_outputs; i++)
        if (out[i].dtype == OT_BF16 || out[i].dtype == OT_F16) return false;
    return true;
}

static int plan(ot_model *m, int64_t batch, const char *remat, ot_precision p, ot_autocast_supports_fn stand_in,
                const char *label, double base) {
    ot_train_options o;
    ot_train_options_default(&o);
    o.plan_only = true;
    o.batch_size = batch;
    o.remat = remat;
    o.precision = p;
    o.precision_supports = stand_in;
    o.optim.kind = OT_OPTIM_ADAM;
    const char *fa = getenv("PRECISION_PLAN_FUSED_ATTN");
    ot_error perr = {0};
    if (fa && ot_fused_attn_parse("PRECISION_PLAN_FUSED_ATTN", fa, &o.fused_attention, &perr)) {
        fprintf(stderr, "%s\n", perr.msg);
        return -1;
    }
    ot_train_session *s = NULL;
    ot_error err = {0};
    if (ot_train_session_new(m, &o, NULL, true, &s, &err)) {
        fprintf(stderr, "%s: %s\n", label, err.msg);
        return -1;
    }
    const ot_plan *pl = ot_train_plan(s);
    size_t kept = ot_plan_bytes_at_peak(pl, OT_MEM_KEPT), tr = ot_plan_bytes_at_peak(pl, OT_MEM_TRANSIENT);
    const ot_autocast_result *ac = ot_train_autocast(s);
    printf("%-34s kept %8.3f GiB  transient %7.3f GiB  sum %8.3f GiB", label, kept / 1073741824.0, tr / 1073741824.0,
           (kept + tr) / 1073741824.0);
    if (base > 0) printf("  %.3fx", (double)(kept + tr) / base);
    printf("  peak %.3f GiB  (low nodes %d, casts %d)\n", ot_plan_peak_bytes(pl) / 1073741824.0, ac->n_low, ac->n_casts);
    if (getenv("PRECISION_PLAN_TOP")) { /* the largest values live at the peak */
        const ot_graph *g = ot_train_graph(s);
        for (int v = 0; v < pl->n_values; v++) {
            const ot_plan_value *pv = &pl->values[v];
            if (pv->nbytes < ((size_t)4 << 20) || pv->category != (getenv("PRECISION_PLAN_KEPT") ? OT_MEM_KEPT : OT_MEM_TRANSIENT) || pv->offset < 0 || pv->alias_of >= 0 || pv->def_step > pl->peak_step ||
                pv->last_step < pl->peak_step)
                continue;
            const ot_value *val = &g->values[v];
            printf("    %-24s %-8s %7.1f MiB  steps %d..%d  by %s (%s)", val->name, ot_dtype_name(val->dtype),
                   pv->nbytes / 1048576.0, pv->def_step, pv->last_step,
                   val->producer >= 0 ? g->nodes[val->producer].name : "-",
                   val->producer >= 0 ? g->nodes[val->producer].op_type : "-");
            for (int c = 0; c < val->n_consumers; c++)
                printf(" -> %s (%s)", g->nodes[val->consumers[c]].name, g->nodes[val->consumers[c]].op_type);
            printf("\n");
        }
        const ot_node *pk = &g->nodes[pl->order[pl->peak_step]];
        printf("    peak at step %d: %s (%s)\n", pl->peak_step, pk->name, pk->op_type);
    }
    ot_train_session_free(s);
    return (int)((kept + tr) >> 10);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: precision_plan MODEL.onnx BATCH [REMAT]\n");
        return 2;
    }
    ot_import_options io = {.fold_eval = ot_cpu_fold_eval, .skip_param_data = true};
    ot_model *m = NULL;
    ot_error err = {0};
    if (ot_model_load(argv[1], &io, &m, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    int64_t batch = atoll(argv[2]);
    const char *remat = argc > 3 ? argv[3] : "none";
    const char *fa = getenv("PRECISION_PLAN_FUSED_ATTN");
    printf("%s, batch %lld, --remat %s, adam, --fused-attention %s\n", argv[1], (long long)batch, remat, fa ? fa : "off");
    int f = plan(m, batch, remat, OT_PRECISION_FP32, NULL, "fp32", 0);
    if (f < 0) return 1;
    double base = (double)f * 1024;
    int ok = plan(m, batch, remat, OT_PRECISION_BF16, NULL, "bf16, the CPU's op table", base) >= 0 &&
             plan(m, batch, remat, OT_PRECISION_BF16, gemm_kernels, "bf16, low GEMM/conv kernels only", base) >= 0 &&
             plan(m, batch, remat, OT_PRECISION_BF16, every_kernel, "bf16, low kernels for every node", base) >= 0 &&
             plan(m, batch, remat, OT_PRECISION_FP16, every_kernel, "fp16, low kernels for every node", base) >= 0;
    ot_model_free(m);
    return ok ? 0 : 1;
}
