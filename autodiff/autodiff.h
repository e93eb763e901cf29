/* autodiff.h — derives the backward pass of a training graph and builds losses.
 *
 * ot_loss_build appends a loss (phase OT_PHASE_LOSS) to an imported forward graph;
 * ot_autodiff_build then appends the backward nodes (phase OT_PHASE_BACKWARD) to the
 * same graph, one gradient rule per op (the table in autodiff/grad_table.c, the rules
 * in grad_*.c). Rules emit IR nodes only, never call kernels, so remat and the planner
 * see the whole step.
 *
 * Executor contract for random backward ops: DropoutGrad regenerates the forward
 * Dropout's mask from the Philox key (seed, step, node id). The node carries an int
 * attribute "rng_node" naming the forward Dropout node. The executor must set
 *     ctx->rng_node = attr "rng_node" if present, else (orig_node >= 0 ? orig_node : id)
 * for every node it runs (recompute clones key on the node they copy).
 */
#ifndef OT_AUTODIFF_H
#define OT_AUTODIFF_H

#include "ir.h"

typedef struct ot_autodiff_options {
    int loss_value;            /* value id of the scalar float loss */
    /* Name patterns (ir/name_pattern.h: globs over whole names, "re:" for a POSIX
     * extended regex searched in the name) matched against param names.
     * A param matching any freeze pattern is frozen; when train patterns are given,
     * only params matching one of them are trained (even one ot_param_rule would keep
     * constant); without them, the params ot_param_rule accepts train. A pattern that matches no
     * param is an OT_E_USAGE error naming it. Frozen params become OT_VK_CONSTANT. */
    const char *const *freeze;
    int n_freeze;
    const char *const *train;
    int n_train;
    /* Extra float values (inputs, activations) whose gradients are wanted, e.g. for
     * `onnxtrain grad` and the finite-difference tests. May be NULL / 0. */
    const int *wrt;
    int n_wrt;
    /* Tests: sum a GatherGrad's scatter with a gradient's other contributions in a
     * Sum, as before GatherGrad could accumulate onto them (same bits, more memory). */
    bool separate_scatter;
    /* fp16 loss scaling (train/train_scale.c): the seed d(loss)/d(loss) is OnesLike
     * times a new scalar "loss_scale" (optimizer-state kind, the loss's dtype, written
     * by the training loop before each run), so every gradient arrives scaled. */
    bool loss_scale;
} ot_autodiff_options;

typedef struct ot_autodiff_result {
    int n_params;
    int *params;       /* value ids of the trained params, in value-id order */
    int *grads;        /* grads[i]: gradient value of params[i] (OT_VK_GRADIENT, graph output) */
    int *wrt_grads;    /* per opt->wrt entry: its gradient value (graph output); n_wrt entries */
    int n_wrt;
    /* BatchNormalization in training mode: after each step the training loop copies
     * state_updates[i] into state_values[i] (both pinned as graph outputs / state). */
    int n_state;
    int *state_values;  /* OT_VK_STATE values (running mean / var inputs) */
    int *state_updates; /* the forward node's new running stats (outputs 1 / 2) */
    int seed_node;      /* the OnesLike node seeding d(loss)/d(loss) */
    int loss_scale_value; /* opt->loss_scale: the scalar the seed is multiplied by; else -1 */
    /* Float initializers that ot_param_rule kept constant and no --train pattern
     * revived (for the "K float initializers kept constant" note). */
    int n_rule_constant;
    /* The first --freeze/--train pattern that matched no param as a glob and was read
     * as a regular expression, as before globs were the default (ir/name_pattern.h),
     * and its option; NULL when none. Points into the options' strings. */
    const char *legacy_pattern, *legacy_option;
} ot_autodiff_result;

/* Appends the backward pass for opt->loss_value to g. Gradients are summed (one Sum
 * node, contributions in emission order) where a value has several consumers. Only
 * nodes on a path from a param (or wrt value) to the loss get rules; integer and
 * shape inputs get no gradient. A param that does not reach the loss gets a
 * ZerosLike gradient. Errors: OT_E_USAGE (bad loss value or regex), OT_E_UNSUPPORTED
 * (an op without a rule on the path), OT_E_SHAPE (a rule that needs static dims). */
/* On failure the nodes and values added so far are removed again. */
ot_status ot_autodiff_build(ot_graph *g, const ot_autodiff_options *opt, ot_autodiff_result *res,
                            ot_error *err);
void ot_autodiff_result_free(ot_autodiff_result *res);

/* ---- which initializers train (autodiff/params_rule.c) ---- */

/* The default rule, documented in docs/training.md "Which initializers train". For
 * every value v, reason[v] (g->n_values entries) is NULL when v is a float
 * OT_VK_PARAM that would train, or a static string saying why that float
 * initializer is kept constant: "scalar" (rank 0), "only Pow's exponent" and the
 * like (every forward consumer reads it in an input slot that takes no gradient),
 * "no differentiable path to the loss" (the targets depend on it only through
 * integer or bool values). An initializer none of the targets depends on at all
 * stays a param (zero gradient). NULL for every other value. targets: the loss, or
 * the graph outputs. Reads shapes and consumers only, never tensor data. */
ot_status ot_param_rule(const ot_graph *g, const int *targets, int n_targets, const char **reason,
                        ot_error *err);

/* How many distinct nodes read value v as a layer's own parameter (a norm's scale or
 * bias, a Gemm's or Conv's weight or bias, a MatMul's weight, a rank-1 Add operand);
 * `what` (cap bytes) names them: "LayerNorms" when one kind, "layers (5 LayerNorms,
 * 4 Gemms)" when several. Above 1 the exporter may have merged identical tensors (the
 * dynamo exporter's optimizer merges every all-zeros bias and all-ones scale of a
 * shape into one tensor). */
int ot_param_layer_sharing(const ot_graph *g, int v, char *what, size_t cap);

/* True when op has a gradient rule (autodiff/grad_table.c): exactly the ops ops.def
 * marks OT_T_DIFF. */
bool ot_grad_has_rule(ot_op op);

/* ---- losses (autodiff/loss.c) ---- */

typedef enum ot_loss_kind {
    OT_LOSS_CROSS_ENTROPY = 0, /* SoftmaxCrossEntropyLoss, mean, new int64 input "labels" */
    OT_LOSS_MSE,               /* MseLoss, new float input "targets" shaped like the output */
    OT_LOSS_OUTPUT,            /* the named model output is already a scalar float loss */
    OT_LOSS_BCE_LOGITS,        /* BceWithLogitsLoss, new float input "targets" shaped like the output */
    OT_LOSS_L1,                /* L1Loss, new float input "targets" shaped like the output */
} ot_loss_kind;

/* The ignore index by default, torch.nn.CrossEntropyLoss's (and the label HF's
 * collators give padding). */
#define OT_DEFAULT_IGNORE_INDEX (-100)

typedef struct ot_loss_options {
    ot_loss_kind kind;
    const char *output_name; /* model output feeding the loss; NULL = the first */
    int class_axis;          /* cross-entropy: class axis of the logits; -1 = last */
    bool has_ignore_index;
    int64_t ignore_index;
} ot_loss_options;

/* Parses "cross-entropy" | "mse" | "output". OT_E_USAGE naming the word otherwise. */
ot_status ot_loss_kind_parse(const char *s, ot_loss_kind *out, ot_error *err);
/* The --loss spelling of a kind ("cross-entropy", "mse", "bce", "l1", "output"). */
const char *ot_loss_kind_name(ot_loss_kind k);

/* Appends the loss to g (phase OT_PHASE_LOSS) and sets *loss_value to the scalar
 * loss. New graph inputs ("labels", "targets") are appended to g->inputs. */
ot_status ot_loss_build(ot_graph *g, const ot_loss_options *opt, int *loss_value, ot_error *err);

/* ---- cross-entropy without the full logits (autodiff/linear_ce.c, issue 28) ---- */

/* "off" -> 0, "auto" -> 1, "on" -> 2 (the order of ot_chunked_loss_mode and
 * ot_fused_attn_mode); OT_E_USAGE naming opt (the option or field) and the word otherwise. */
ot_status ot_off_auto_on_parse(const char *opt, const char *s, int *out, ot_error *err);

typedef enum ot_chunked_loss_mode {
    OT_CHUNKED_LOSS_OFF = 0, /* the loss builder's graph as it is */
    OT_CHUNKED_LOSS_AUTO,    /* fused when a chunk holds fewer rows than the logits */
    OT_CHUNKED_LOSS_ON,      /* fused whenever the pattern matches */
} ot_chunked_loss_mode;

/* "off" | "on" | "auto"; OT_E_USAGE naming opt (the option or field) and the word otherwise. */
ot_status ot_chunked_loss_parse(const char *opt, const char *s, ot_chunked_loss_mode *out, ot_error *err);

typedef struct ot_linear_ce_options {
    ot_chunked_loss_mode mode;
    int64_t chunk_rows;      /* rows of logits per chunk; 0 = ot_linear_ce_default_chunk */
    const char *keep_logits; /* non-NULL: what reads the logits (the rewrite is skipped) */
} ot_linear_ce_options;

typedef struct ot_linear_ce_result {
    bool applied, has_bias, trans_w;
    int node;                /* the LinearCrossEntropy node when applied */
    int64_t rows, vocab, chunk_rows;
    size_t logits_bytes;     /* the [rows, vocab] float32 logits the fused op never holds */
    char why[320];           /* what was fused, or why nothing was */
} ot_linear_ce_result;

/* Rows per chunk when none is given: the largest power of two whose chunk of logits
 * fits 16 MiB, at most rows. */
int64_t ot_linear_ce_default_chunk(int64_t rows, int64_t vocab);

/* Replaces the MatMul/Gemm head and the mean cross-entropy producing loss_value by one
 * LinearCrossEntropy node (see linear_ce.c for the patterns). out_value, the model
 * output the loss reads (-1: none), may lie on the chain; it is then dropped from
 * g->outputs. Not matching is no error: r->applied false and r->why says why. Only
 * allocation failures fail. */
ot_status ot_linear_ce_rewrite(ot_graph *g, int loss_value, int out_value, const ot_linear_ce_options *o,
                               ot_linear_ce_result *r, ot_error *err);

/* ---- attention that keeps no probabilities (autodiff/fused_attn.c, issue 27/28) ---- */

typedef enum ot_fused_attn_mode {
    OT_FUSED_ATTN_OFF = 0, /* the exported MatMul / Softmax / MatMul graph as it is */
    OT_FUSED_ATTN_AUTO,    /* fused where the keys outnumber the head size (P larger than Q) */
    OT_FUSED_ATTN_ON,      /* fused wherever the pattern matches */
} ot_fused_attn_mode;

/* "off" | "on" | "auto"; OT_E_USAGE naming opt (the option or field) and the word otherwise
 * (ot_off_auto_on_parse, as --chunked-loss). */
ot_status ot_fused_attn_parse(const char *opt, const char *s, ot_fused_attn_mode *out, ot_error *err);

typedef struct ot_fused_attn_result {
    int n_fused, n_dropout, n_skipped; /* blocks fused (with dropout), Softmaxes left alone */
    size_t prob_bytes;                 /* float32 probabilities of the fused blocks, at bound shapes */
    char why[160];                     /* what was fused, or why nothing was */
    char first_skip[320];              /* the first Softmax left alone, and why */
} ot_fused_attn_result;

/* Replaces each scaled-dot-product attention block of g (see fused_attn.c for the
 * patterns) by one Attention node. Not matching is no error: r says what happened.
 * Only allocation failures fail. */
ot_status ot_fused_attn_rewrite(ot_graph *g, ot_fused_attn_mode mode, ot_fused_attn_result *r, ot_error *err);

#endif
