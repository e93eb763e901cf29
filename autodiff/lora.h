/* lora.h — low-rank adapters (LoRA, Hu et al. 2021) as a rewrite of the forward graph,
 * before the loss and the backward pass are built (`onnxtrain train --lora RANK`).
 *
 * For each adapted weight W (rank 2, float32) every MatMul or Gemm that reads it,
 * y = x·W (through a Transpose of W, or Gemm's transB, where W is stored [out, in]),
 * becomes
 *     y = x·W + s · ((x·A)·B),   s = alpha / rank (times Gemm's alpha)
 * with two new params A [in, rank] and B [rank, out] named "<W>.lora_A" and
 * "<W>.lora_B" (matmul layout: they are the transposes of PEFT's lora_A.weight and
 * lora_B.weight). W's path is left as it was, so the merged weight
 *     W' = W + s·(A·B)        (W' = W + s·(A·B)^T when W is stored [out, in])
 * computes exactly the rewritten graph. The caller initialises A (B stays zero, so
 * the first step equals the base model) and freezes everything else through the
 * params rule's --train patterns (OT_LORA_TRAIN_PATTERN).
 *
 * Which weights (ot_lora_targets; docs/training.md "LoRA"): a float32 param of rank 2
 * is eligible when every forward node reading it is a MatMul or Gemm (transA 0) that
 * reads it as its second input, directly or through a Transpose that swaps its two
 * axes and whose readers are all such nodes, and whose first input is not an
 * initializer. By default the eligible weights are adapted except the head: a
 * weight one of whose MatMul/Gemm outputs reaches the output the loss reads through
 * forward nodes none of which is another MatMul or Gemm (an LM head, a classifier;
 * through a bias Add, a Cast, a Reshape). Embeddings (read by Gather, tied heads too)
 * are not eligible. With --lora-target GLOB,... the eligible weights whose name
 * matches a glob (fnmatch)
 * are adapted, the head included; a glob that matches none is an error. */
#ifndef OT_LORA_H
#define OT_LORA_H

#include "ir.h"

/* The --train pattern (POSIX ERE) that trains the adapters and nothing else. */
#define OT_LORA_TRAIN_PATTERN "*.lora_[AB]"

typedef struct ot_lora_options {
    int64_t rank;               /* 0: no LoRA */
    double alpha;               /* 0: rank */
    const char *const *targets; /* globs over param names; n_targets 0: the default rule */
    int n_targets;
    const char *output;         /* the graph output the loss reads (NULL: the first), for the head test */
} ot_lora_options;

/* Parses "RANK[:ALPHA]" (rank 1..65536, alpha a finite number > 0) into o->rank and
 * o->alpha; OT_E_USAGE naming --lora otherwise. */
ot_status ot_lora_parse(const char *text, ot_lora_options *o, ot_error *err);

/* alpha / rank with alpha defaulting to rank. */
double ot_lora_scale(const ot_lora_options *o);

typedef struct ot_lora_adapter {
    int base;        /* the frozen weight W */
    int a, b;        /* A [in, rank], B [rank, out] */
    int64_t in, out;
    bool transposed; /* W is stored [out, in] */
} ot_lora_adapter;

typedef struct ot_lora_result {
    int n;
    ot_lora_adapter *v; /* in value-id order of the base weights */
    int64_t rank;
    double alpha, scale;
} ot_lora_result;

/* For every value v, why[v] is NULL when v would be adapted, else a static string:
 * "the head ..." (eligible, left out by the default rule), "not matched" (eligible, no glob
 * matched), or why it is not eligible ("not float32 of rank 2", "read by Gather",
 * ...); values that are not float params get "not a param". Fails (OT_E_USAGE)
 * when a glob matches no eligible weight, naming it, and when nothing is adapted. */
ot_status ot_lora_targets(const ot_graph *g, const ot_lora_options *o, const char **why, ot_error *err);

/* Rewrites g (see above): adds A (data zero: the caller fills it) and B (zero) per
 * adapted weight, the adapter nodes (phase forward) and the scale constant. Shapes
 * must be static where adapters go (bind the dims first). On failure g may be
 * partly rewritten: apply it to a copy. */
ot_status ot_lora_apply(ot_graph *g, const ot_lora_options *o, ot_lora_result *res, ot_error *err);
void ot_lora_result_free(ot_lora_result *r);

#endif
