/* cpu_dispatch.c — routes a node to its CPU kernel (placeholder until kernels land). */
#include "kernels/kernel.h"

ot_status ot_cpu_run_node(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                          ot_error *err) {
    (void)in;
    (void)out;
    (void)ctx;
    return ot_fail(err, OT_E_UNSUPPORTED, "node '%s': no CPU kernel for %s", node->name, node->op_type);
}

size_t ot_cpu_workspace_bytes(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)node;
    (void)in;
    (void)out;
    return 0;
}

bool ot_cpu_supports(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)node;
    (void)in;
    (void)out;
    return false;
}
