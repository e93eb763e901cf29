/* info_precision.c — `onnxtrain info MODEL --precision bf16|fp16`: where the
 * mixed-precision rewrite (autodiff/autocast.h) would run each node on the CPU, asked
 * of the CPU's op table as `train --precision` asks it: the nodes that run low, those
 * on the float32 list, those that fall back to float32 with casts for want of a
 * low-precision kernel, and those that mix float32 activations in. Printing only. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "ir/json_write.h"
#include "kernels/kernel.h"

static bool cpu_supports(void *ctx, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)ctx;
    return ot_cpu_supports(node, in, out);
}

static const struct {
    ot_autocast_class c;
    const char *key, *text;
} groups[] = {
    {OT_AC_LOW, "low", "run in %s"},
    {OT_AC_F32_LIST, "float32_list", "float32 list (norms, softmax, losses, sums, exp/log): read low inputs through casts up"},
    {OT_AC_FALLBACK, "fallback", "no %s kernel on the CPU: float32, low inputs through casts up"},
    {OT_AC_PROMOTED, "promoted", "mix float32 activations in: float32, low inputs through casts up"},
};

static void print_group(FILE *f, const ot_graph *g, const ot_autocast_result *r, int k, const char *dt, bool json) {
    int n = 0;
    for (int i = 0; i < r->n_nodes; i++) n += r->cls[i] == groups[k].c;
    if (json) fprintf(f, "%s\"%s\": [", k ? ", " : "", groups[k].key);
    else {
        if (!n) return;
        fprintf(f, "  ");
        fprintf(f, groups[k].text, dt);
        fprintf(f, " (%d):\n   ", n);
    }
    for (int i = 0, m = 0; i < r->n_nodes; i++) {
        if (r->cls[i] != groups[k].c) continue;
        const ot_node *nd = &g->nodes[i];
        if (json) {
            if (m++) fputs(", ", f);
            ot_json_string(f, nd->name && *nd->name ? nd->name : nd->op_type);
        } else
            fprintf(f, " %s (%s)%s", nd->name && *nd->name ? nd->name : "?", nd->op_type, ++m < n ? "," : "\n");
    }
    if (json) fputc(']', f);
}

ot_status ot_info_print_precision(FILE *f, const ot_graph *g0, ot_precision p, bool json, ot_error *err) {
    ot_graph *g = ot_graph_clone(g0, false);
    if (!g) return ot_fail(err, OT_E_MEMORY, "info --precision: out of memory");
    ot_autocast_result r;
    ot_status st = ot_autocast_apply(g, ot_precision_dtype(p), cpu_supports, NULL, &r, err);
    if (st) {
        ot_graph_free(g);
        return st;
    }
    const char *dt = ot_precision_name(p);
    if (json) fprintf(f, ",\n  \"precision\": {\"precision\": \"%s\", \"device\": \"cpu\", ", dt);
    else
        fprintf(f, "precision %s on the CPU (docs/training.md, \"Mixed precision\"): %d nodes low, %d low-list nodes "
                   "without a %s kernel, %d casts added\n",
                dt, r.n_low, r.n_low_list_fallback, dt, r.n_casts);
    for (int k = 0; k < (int)(sizeof groups / sizeof groups[0]); k++) print_group(f, g, &r, k, dt, json);
    if (json) fprintf(f, ", \"casts\": %d}", r.n_casts);
    ot_autocast_result_free(&r);
    ot_graph_free(g);
    return OT_OK;
}
