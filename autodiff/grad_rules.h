/* grad_rules.h — private to autodiff/: the builder the gradient rules emit nodes
 * with, and the rule entry point of each op family (grad_*.c), which grad_table.c
 * maps every differentiable op to.
 *
 * A rule gets a shallow copy of the forward node (ids and attributes; the graph's
 * node array may move while the rule adds nodes) and dy[i], the gradient value of
 * output i or -1 when no gradient reaches it. It adds contributions to the inputs
 * that need them with ot_gb_add / ot_gb_add_like. Allocation failures inside the
 * helpers set c->oom and return -1, so rules need not check every call; the driver
 * checks c->oom after each rule.
 */
#ifndef OT_GRAD_RULES_H
#define OT_GRAD_RULES_H

#include "autodiff/autodiff.h"

typedef struct ot_grad_ctx {
    ot_graph *g;
    ot_error *err;
    const ot_node *fwd;    /* the forward node whose rule runs */
    bool *needs;           /* per value id (of the graph before autodiff): gets a gradient */
    int n_needs;
    int **contrib;         /* per value: gradient contributions so far (value ids) */
    int *n_contrib, *cap_contrib;
    bool oom;
    bool separate_scatter; /* ot_autodiff_options.separate_scatter */
} ot_grad_ctx;

/* New backward value (kind activation) with dtype and shape. */
int ot_gb_new(ot_grad_ctx *c, ot_dtype dt, const ot_shape *s);
/* Adds a backward node; returns its node id. */
int ot_gb_emit(ot_grad_ctx *c, ot_op op, const int *in, int n_in, const int *out, int n_out);
/* Attribute setters for a node just emitted (skip when node_id < 0). */
void ot_gb_set_int(ot_grad_ctx *c, int node_id, const char *name, int64_t v);
void ot_gb_set_float(ot_grad_ctx *c, int node_id, const char *name, float v);
void ot_gb_set_ints(ot_grad_ctx *c, int node_id, const char *name, const int64_t *v, int n);
void ot_gb_set_string(ot_grad_ctx *c, int node_id, const char *name, const char *v);
void ot_gb_copy_attrs(ot_grad_ctx *c, int node_id, const ot_node *src);
/* One-output node whose output has dtype/shape of value `like`; returns the value. */
int ot_gb_op(ot_grad_ctx *c, ot_op op, const int *in, int n_in, int like);
/* Same, with an explicit dtype/shape; *node_out (may be NULL) gets the node id. */
int ot_gb_op_s(ot_grad_ctx *c, ot_op op, const int *in, int n_in, ot_dtype dt, const ot_shape *s, int *node_out);
int ot_gb_const_f32(ot_grad_ctx *c, float v);                    /* scalar */
int ot_gb_const_i64(ot_grad_ctx *c, const int64_t *v, int n);     /* 1-D */
/* Reshape(x, constant shape of `like`); one symbolic dim becomes -1. */
ot_status ot_gb_reshape_like(ot_grad_ctx *c, int x, int like, int *out);
ot_shape ot_gb_shape(const ot_grad_ctx *c, int v);
ot_dtype ot_gb_dtype(const ot_grad_ctx *c, int v);
/* True when the value exists, is floating point and lies on a param→loss path. */
bool ot_gb_needs(const ot_grad_ctx *c, int v);
/* Adds grad as a contribution to value v (ignored when v needs none). */
void ot_gb_add(ot_grad_ctx *c, int v, int grad);
/* Same, through ReduceToLike(grad, v) when grad's shape may differ from v's. */
void ot_gb_add_like(ot_grad_ctx *c, int v, int grad, const ot_shape *grad_shape);
/* dy or, when -1, ZerosLike(fwd_value). */
int ot_gb_dy_or_zeros(ot_grad_ctx *c, int dy, int fwd_value);

/* A gradient rule; the driver runs the one grad_table.c holds for the node's op. */
typedef ot_status (*ot_grad_rule_fn)(ot_grad_ctx *c, const ot_node *n, const int *dy);
/* The rule of op from grad_table.c, NULL when it has none (not differentiable). */
ot_grad_rule_fn ot_grad_rule_of(ot_op op);

/* Rule families: OT_E_UNSUPPORTED with a message when op is not theirs. */
ot_status ot_grad_elementwise(ot_grad_ctx *c, const ot_node *n, const int *dy);
ot_status ot_grad_matmul(ot_grad_ctx *c, const ot_node *n, const int *dy);
ot_status ot_grad_conv(ot_grad_ctx *c, const ot_node *n, const int *dy);
ot_status ot_grad_pool(ot_grad_ctx *c, const ot_node *n, const int *dy);
ot_status ot_grad_norm(ot_grad_ctx *c, const ot_node *n, const int *dy);
ot_status ot_grad_shape(ot_grad_ctx *c, const ot_node *n, const int *dy);
ot_status ot_grad_loss(ot_grad_ctx *c, const ot_node *n, const int *dy);
ot_status ot_grad_math(ot_grad_ctx *c, const ot_node *n, const int *dy);
/* layout and indexing (issue 13): Pad, Tile, Trilu, GatherElements, CumSum */
ot_status ot_grad_index(ot_grad_ctx *c, const ot_node *n, const int *dy);
/* ops batch 1 (issue 26): Elu, Selu, Celu, PRelu, ThresholdedRelu, Softsign, and the
 * zero-gradient Sign, Floor, Ceil, Round */
ot_status ot_grad_activation(ot_grad_ctx *c, const ot_node *n, const int *dy);
/* ops batch 1 (issue 26): ReduceMax .. ReduceSumSquare (ReduceGrad) */
ot_status ot_grad_reduce_ext(ot_grad_ctx *c, const ot_node *n, const int *dy);
/* ops3 (issue 26): RMSNormalization, RotaryEmbedding, Attention (grad_xfmr.c) */
ot_status ot_grad_xfmr(ot_grad_ctx *c, const ot_node *n, const int *dy);
/* grad_select.c (ops batch 4, issue 26): Einsum, TopK */
ot_status ot_grad_select(ot_grad_ctx *c, const ot_node *n, const int *dy);
/* grad_rnn.c (issue 26): RNN, GRU, LSTM */
ot_status ot_grad_rnn(ot_grad_ctx *c, const ot_node *n, const int *dy);

#endif
