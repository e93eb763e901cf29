/* cuda_op_status.c — ot_cuda_op_status (kernels/kernel.h): what the CUDA backend's op
 * table says of each op, read from the same kernels/cuda/cuda_ops.def the module
 * builds its table from (only the first two columns), compiled into onnxtrain_lib so
 * that tests see it on machines without a GPU and without loading the module. */
#include "kernels/kernel.h"

static const unsigned char CUDA_STATUS[OT_OP_COUNT] = {
#define OT_CUDA_OP(op, status, run, supports, workspace) [OT_OP_##op] = OT_CUDA_##status,
#include "kernels/cuda/cuda_ops.def"
#undef OT_CUDA_OP
};

ot_cuda_op_kind ot_cuda_op_status(ot_op op) {
    if (op <= OT_OP_UNKNOWN || op >= OT_OP_COUNT) return OT_CUDA_MISSING;
    return (ot_cuda_op_kind)CUDA_STATUS[op];
}
