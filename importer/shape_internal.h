/* shape_internal.h — what the shape-inference driver (shape.c), the per-op shape
 * rules (shape_rules*.c) and constant folding (fold.c) share. Not a public header:
 * other modules call ot_shape_infer / ot_graph_bind_dim from importer.h. */
#ifndef OT_SHAPE_INTERNAL_H
#define OT_SHAPE_INTERNAL_H

#include "importer.h"

/* State of one inference pass. `ivals` tracks, per value, the elements of small
 * integer tensors (rank 0 or 1, at most OT_MAX_RANK elements) as far as they are
 * known, stored in an ot_shape (rank = element count, dim/sym = each element). This
 * is how Shape -> Gather -> Concat -> Reshape keeps a symbolic batch dim before
 * binding, without running kernels. rank < 0: nothing known. */
typedef struct ot_shape_ctx {
    ot_graph *g;
    ot_error *err;
    ot_shape *ivals;
    int n_ivals;
} ot_shape_ctx;

/* "node 'name' (Op)" for messages. */
const char *ot_shape_node_label(const ot_node *n);

/* Fails with OT_E_SHAPE, prefixing "node 'name' (Op): ". */
ot_status ot_shape_fail(ot_shape_ctx *c, const ot_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Normalises an axis attribute or input of n (negative counts from the end) for rank:
 * valid are -rank .. rank - 1, or -rank .. rank when `inclusive` (Flatten). Outside
 * that OT_E_MODEL naming the node, the axis and `of` (the shape it indexes): a huge
 * value (2^62) is refused, never narrowed into range. */
ot_status ot_shape_axis(ot_shape_ctx *c, const ot_node *n, int64_t axis, int rank, bool inclusive, const ot_shape *of,
                        int *out);

/* Checked int64 arithmetic for rules that combine attribute values (pads, dilations,
 * split sizes, slice bounds): false on overflow, and the rule refuses the node. */
static inline bool ot_i64_add(int64_t a, int64_t b, int64_t *r) { return !__builtin_add_overflow(a, b, r); }
static inline bool ot_i64_sub(int64_t a, int64_t b, int64_t *r) { return !__builtin_sub_overflow(a, b, r); }
static inline bool ot_i64_mul(int64_t a, int64_t b, int64_t *r) { return !__builtin_mul_overflow(a, b, r); }
/* Fails with OT_E_MODEL, prefixing "node 'name' (Op): ": the node's attributes are
 * wrong whatever its inputs' shapes. */
ot_status ot_shape_fail_model(ot_shape_ctx *c, const ot_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Input slot i of n as a value, NULL when absent or out of range. */
const ot_value *ot_shape_input(const ot_shape_ctx *c, const ot_node *n, int i);

/* Known elements of a small integer value (constant data or propagated shape data),
 * NULL when nothing is known. rank is the element count (1 for a scalar). An element
 * is a known integer when ot_shape_ival_known says so; negative constants (Reshape's
 * -1, Slice's -3) carry sym == OT_IVAL_CONST to tell them from unknown elements,
 * which have dim -1 and sym -1 or a symbol id (a symbolic dim read by Shape). */
#define OT_IVAL_CONST (-2)
const ot_shape *ot_shape_ivals(ot_shape_ctx *c, int value_id);
/* Element j is a known integer (possibly negative). */
static inline int ot_shape_ival_known(const ot_shape *iv, int j) {
    return iv->dim[j] >= 0 || iv->sym[j] == OT_IVAL_CONST;
}

/* A shape rule: computes the dtype and shape of every output of node n into dt[] /
 * sh[] (n->n_outputs entries, at least one, pre-filled with OT_UNDEFINED / unknown). */
typedef ot_status (*ot_shape_rule_fn)(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);

/* Runs the rule of n's op from the table in shape_rules.c (OT_E_INTERNAL when the op
 * has none; ot_shape_has_rule in importer.h says which have one). */
ot_status ot_shape_rule(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);

/* Records what is known of small integer outputs of n in c->ivals (after the
 * outputs' dtypes and shapes are set). OT_E_SHAPE naming the node when arithmetic on
 * known elements overflows int64. */
ot_status ot_shape_propagate_ivals(ot_shape_ctx *c, const ot_node *n);

/* Rules of the layout and shape-computing ops, in shape_rules_tensor.c; entries of
 * the table in shape_rules.c. */
ot_status ot_shape_rule_flatten(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
ot_status ot_shape_rule_reshape(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
ot_status ot_shape_rule_transpose(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
ot_status ot_shape_rule_squeeze(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh); /* and Unsqueeze */
ot_status ot_shape_rule_concat(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
ot_status ot_shape_rule_split(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
ot_status ot_shape_rule_slice(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
ot_status ot_shape_rule_gather(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
ot_status ot_shape_rule_shape(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
ot_status ot_shape_rule_range(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
ot_status ot_shape_rule_expand(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
ot_status ot_shape_rule_constant_of_shape(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
ot_status ot_shape_rule_constant(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);

/* ---- layout and indexing (issue 13): shape_rules_index.c ---- */
ot_status ot_shape_rule_pad(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
ot_status ot_shape_rule_tile(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
ot_status ot_shape_rule_trilu(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
/* CumSum, ScatterND, ScatterElements: like input 0 */
ot_status ot_shape_rule_like_data(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
ot_status ot_shape_rule_gather_nd(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
ot_status ot_shape_rule_gather_elements(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);

/* ---- spatial ops (issue 26, ops batch 2): shape_rules_spatial.c ---- */
/* Resize, Upsample: (X, roi, scales, sizes) after normalisation */
ot_status ot_shape_rule_resize(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
ot_status ot_shape_rule_conv_transpose(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
ot_status ot_shape_rule_depth_space(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);

/* ---- random sources (issue 13): shape_rules_random.c ---- */
/* RandomUniformLike: input 0's shape, attribute dtype or input 0's; RandomUniform:
 * both from attributes (dtype float32 by default) */
ot_status ot_shape_rule_random(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
/* shape_rules_ops1.c (ops batch 1, issue 26) */
ot_status ot_shape_rule_prelu(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
ot_status ot_shape_rule_arg_reduce(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
ot_status ot_shape_rule_group_norm(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
/* ---- ops batch 4 (issue 26): shape_rules_ops4.c ---- */
ot_status ot_shape_rule_einsum(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
ot_status ot_shape_rule_einsum_grad(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
ot_status ot_shape_rule_top_k(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
ot_status ot_shape_rule_one_hot(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
ot_status ot_shape_rule_size(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
ot_status ot_shape_rule_rnn(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh); /* GRU, LSTM */
ot_status ot_shape_rule_rnn_grad(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
/* Up to max int elements of input slot `slot` when known (constant data, or shape data
 * for short vectors); -1 when not known, 0 when absent (shape_rules_index.c). */
int ot_shape_known_ints(ot_shape_ctx *c, const ot_node *n, int slot, int64_t *v, int max);

/* ---- ops3 (issue 26), transformer ops: shape_rules_xfmr.c ---- */
ot_status ot_shape_rule_rms_norm(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
/* RotaryEmbedding and RotaryEmbeddingGrad: like input 0 */
ot_status ot_shape_rule_rotary(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
ot_status ot_shape_rule_attention(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
ot_status ot_shape_rule_attention_grad(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);

/* ---- chunked cross-entropy (issue 28): shape_rules_lce.c ---- */
ot_status ot_shape_rule_linear_ce(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);
ot_status ot_shape_rule_linear_ce_grad(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh);

/* Shape's [start, end) of a rank-r input from its start / end attributes, clamped as
 * the spec says (opset 15). */
void ot_shape_range_attrs(const ot_node *n, int r, int *s, int *e);

/* Product of dims [from, to) of s: known when all are known; a symbol when exactly
 * one dim is symbolic and the others multiply to 1; unknown otherwise. False when
 * the known dims (none of them 0) multiply past int64. */
bool ot_shape_dim_product(const ot_shape *s, int from, int to, int64_t *dim, int32_t *sym);

/* Multidirectional (numpy) broadcast of a and b into out; false on a contradiction. */
bool ot_shape_broadcast(const ot_shape *a, const ot_shape *b, ot_shape *out);

/* Constant folding of one node whose outputs have been shape-inferred: when every
 * input is a constant with data (or the node is Shape of a static shape, or a
 * Constant), runs it on the CPU and turns its outputs into constants, removing the
 * node. *folded tells whether it did; a kernel that is missing or fails leaves the
 * node in place (not an error). */
ot_status ot_fold_node(ot_graph *g, int node_id, bool *folded, ot_error *err);

#endif
