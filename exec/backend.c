/* backend.c — helpers shared by every backend behind exec/backend.h. */
#include "exec/backend.h"

void ot_backend_free(ot_backend *be) {
    if (be && be->destroy) be->destroy(be);
}

static size_t backend_workspace_bytes(void *ctx, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    ot_backend *be = ctx;
    return be->workspace_bytes(be, node, in, out);
}

ot_plan_device ot_backend_plan_device(ot_backend *be) {
    ot_plan_device dev = {0};
    if (be && be->workspace_bytes) {
        dev.workspace_bytes = backend_workspace_bytes;
        dev.ctx = be;
    }
    return dev;
}
