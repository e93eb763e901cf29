/* autocast.h — automatic mixed precision (`--precision bf16|fp16`) as a rewrite of the
 * forward graph, before the loss and the backward pass are built, in the sense of
 * PyTorch's autocast (its op lists are the anchor):
 *
 *  - low list (MatMul, Gemm, Conv, ConvTranspose, Attention): where the backend has a
 *    kernel for the node with its float inputs and outputs in the low dtype, each
 *    float32 input is read through a Cast to the low dtype and the outputs are low.
 *    Otherwise the node runs in float32 (a "fallback"), reading low inputs through a
 *    Cast up.
 *  - float32 list (normalisations, softmax, losses, reductions, exp/log/pow and the
 *    other range-sensitive math): low inputs are read through a Cast up.
 *  - every other op follows its inputs: when a float input is low and the others are
 *    low or initializers (the bias Add that torch's addmm holds inside the Linear an
 *    exporter split into MatMul + Add), and the backend has a low kernel, it runs low
 *    with its float32 initializers cast down; otherwise in float32 with casts up
 *    (torch's promotion to the widest input type).
 *
 * Every value is cast at most once per dtype (a weight's low copy is one Cast node,
 * made once per step and sized by the planner like any value); the master weights,
 * the data inputs and the graph outputs keep their dtypes (an output computed low is
 * cast back, so the loss reads float32). Gradients of the casts are casts back
 * (autodiff/grad_elementwise.c), so param gradients arrive in float32 and the
 * optimizer and its state stay float32. Whether a kernel exists is asked of the
 * backend through an injected predicate, so new low-precision kernels take effect
 * without a change here. Only float32 values take part (a float64 or an already low
 * model is left as it is). */
#ifndef OT_AUTOCAST_H
#define OT_AUTOCAST_H

#include "ir.h"

typedef enum ot_precision { OT_PRECISION_FP32 = 0, OT_PRECISION_BF16, OT_PRECISION_FP16 } ot_precision;

/* Parses "fp32" | "bf16" | "fp16" (also "float32", "bfloat16", "float16");
 * OT_E_USAGE naming --precision and the value otherwise. */
ot_status ot_precision_parse(const char *text, ot_precision *out, ot_error *err);
const char *ot_precision_name(ot_precision p);
/* OT_F32, OT_BF16 or OT_F16. */
ot_dtype ot_precision_dtype(ot_precision p);

/* True when the backend has a kernel for node with these input and output tensors
 * (dtype and shape set, data NULL): exec/backend.h's supports, or a test's fake. */
typedef bool (*ot_autocast_supports_fn)(void *ctx, const ot_node *node, const ot_tensor *in, const ot_tensor *out);

/* What the pass did to each node of the forward graph. */
typedef enum ot_autocast_class {
    OT_AC_F32 = 0,      /* untouched: no low input, not on the low list */
    OT_AC_LOW,          /* runs in the low dtype */
    OT_AC_F32_LIST,     /* on the float32 list, reads low inputs through casts up */
    OT_AC_FALLBACK,     /* would run low, has no low kernel: float32 with casts up */
    OT_AC_PROMOTED,     /* follows its inputs, mixed with float32 activations: float32 with casts up */
    OT_AC_CAST,         /* a Cast this pass added */
} ot_autocast_class;

typedef struct ot_autocast_result {
    ot_dtype low;
    int n_nodes;              /* entries of cls: the graph's node count after the pass */
    unsigned char *cls;       /* ot_autocast_class per node id */
    int n_low, n_f32_list, n_fallback, n_promoted, n_casts;
    /* fallback nodes on the low list (MatMul, Conv, ...): where a kernel would pay */
    int n_low_list_fallback;
} ot_autocast_result;

/* The list an op is on: 1 low, -1 float32, 0 follows its inputs. */
int ot_autocast_op_list(ot_op op);

/* Rewrites g's forward graph for `low` (OT_BF16 or OT_F16; OT_F32 does nothing).
 * Shapes should be known where casts go (a Cast copies its input's shape). On
 * failure g may be partly rewritten: apply it to a copy. */
ot_status ot_autocast_apply(ot_graph *g, ot_dtype low, ot_autocast_supports_fn supports, void *ctx,
                            ot_autocast_result *res, ot_error *err);
void ot_autocast_result_free(ot_autocast_result *r);

/* After the backward pass is built: a cast the pass added whose result the backward
 * pass reads is made again there, by a recompute clone of the Cast (phase recompute,
 * placed by the schedule just before its first reader), when that
 * is exact and cheaper to keep: a weight's low copy (its source, the float32 param,
 * is held anyway) and a cast up of a low value (the low value, half the bytes, is
 * what stays); not a graph output, which is held for the whole step anyway. So the
 * activations kept for the backward pass are the low tensors,
 * and the planner, remat and --memory-budget see that. Same bits: a Cast is exact
 * arithmetic on the same input. Returns the number of casts made again, or -1
 * when out of memory. */
int ot_autocast_recast_backward(ot_graph *g, const ot_autocast_result *r);
/* After the backward pass is built: a backward node the backend cannot run in the
 * dtypes its gradient rule gave it (a ReluGrad or a gradient sum over low values
 * where only the GEMMs have low kernels), but can in float32, reads its low inputs
 * through casts up and writes its low outputs through casts down: the nodes from
 * first_node on (the backward pass). Returns the number of nodes so wrapped, or -1
 * when out of memory. */
int ot_autocast_legalize_backward(ot_graph *g, ot_dtype low, int first_node, ot_autocast_supports_fn supports,
                                  void *ctx);

/* The same for the nodes of one phase: OT_PHASE_FORWARD legalizes the forward graph
 * of a model exported in float16 or bfloat16 (train/lowp_model.c), whose nodes run in
 * the model's dtype where the backend has a kernel and in float32 with casts
 * elsewhere. */
int ot_autocast_legalize(ot_graph *g, ot_dtype low, int first_node, ot_phase phase, ot_autocast_supports_fn supports,
                         void *ctx);

/* The suffix of those casts' names (and of their outputs'), by which remat tells
 * them from clones of its own (remat/segments.c). */
#define OT_AUTOCAST_AGAIN ".again"
const char *ot_autocast_class_name(ot_autocast_class c);

#endif
