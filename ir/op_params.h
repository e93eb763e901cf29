/* op_params.h — typed op parameters: what the kernels of both backends read from a
 * node's attributes, parsed once into a tagged union per op family (libonnx's
 * init, ggml's op_params) instead of by name on every run. ot_graph_resolve_params
 * fills every node's `params` (ir.h's ot_node) when an executor is built, after every
 * pass that adds or copies nodes; constant folding resolves the node it evaluates.
 * Resolution range-checks every integer attribute it narrows (an `int` field): one
 * out of int range is OT_E_MODEL naming the node, never a silent cast. Defaults and
 * the handling of odd attributes (a wrong-typed attribute counts as absent; a list of
 * the wrong length is kept with its count, for the geometry code to ignore as
 * before) are those the kernels applied when they parsed the attributes themselves.
 *
 * Lists are copied (at most OT_PARAMS_MAX_LIST entries; a longer list keeps its
 * count only, which no valid node has); the Reduce axes, Transpose's perm and Split's
 * sizes point into the node's own attribute, valid while the attribute is. */

/* ir.h includes this file at the point where its types are needed, and this file
 * needs ir.h's status, error and dtype types first: include ir.h before the guard. */
#include "ir.h"

#ifndef OT_OP_PARAMS_H
#define OT_OP_PARAMS_H

#define OT_PARAMS_MAX_LIST 16

typedef enum ot_params_kind {
    OT_PARAMS_UNRESOLVED = 0, /* a zeroed node: nothing resolved yet */
    OT_PARAMS_NONE,           /* resolved; the op reads no attributes */
    OT_PARAMS_GEMM,
    OT_PARAMS_WINDOW,
    OT_PARAMS_ACT,
    OT_PARAMS_DROPOUT,
    OT_PARAMS_NORM,
    OT_PARAMS_LOSS,
    OT_PARAMS_REDUCE,
    OT_PARAMS_LAYOUT,
    OT_PARAMS_OPTIM,
    OT_PARAMS_MATH,
    /* ---- layout and indexing (issue 13) ---- */
    OT_PARAMS_INDEX,
    OT_PARAMS_RANDOM, /* random sources (issue 13) */
    OT_PARAMS_UNARY,  /* ops batch 1 (issue 26): Elu, Selu, Celu, ThresholdedRelu */
    OT_PARAMS_RESIZE, /* Resize, Upsample, ResizeGrad (issue 26, ops batch 2) */
    OT_PARAMS_DEPTH,  /* DepthToSpace, SpaceToDepth (issue 26, ops batch 2) */
    OT_PARAMS_XFMR,   /* ops3 (issue 26): RMSNormalization, RotaryEmbedding, Attention */
    /* ---- ops batch 4 (issue 26) ---- */
    OT_PARAMS_EINSUM, /* Einsum, EinsumGrad */
    OT_PARAMS_SELECT, /* TopK, OneHot */
    OT_PARAMS_RNN,    /* RNN, GRU, LSTM, RnnGrad */
} ot_params_kind;

/* Gemm */
typedef struct ot_gemm_params {
    bool trans_a, trans_b;
    float alpha, beta;
} ot_gemm_params;

typedef enum ot_auto_pad { OT_AUTO_PAD_NOTSET, OT_AUTO_PAD_SAME_UPPER, OT_AUTO_PAD_SAME_LOWER, OT_AUTO_PAD_VALID } ot_auto_pad;

/* Conv, MaxPool, AveragePool and their gradients. n_* < 0: the attribute is absent. */
typedef struct ot_window_params {
    int group; /* Conv family; 1 by default */
    int n_kernel, n_strides, n_dilations, n_pads;
    int64_t kernel[OT_PARAMS_MAX_LIST], strides[OT_PARAMS_MAX_LIST], dilations[OT_PARAMS_MAX_LIST],
        pads[OT_PARAMS_MAX_LIST];
    ot_auto_pad auto_pad;
    bool count_include_pad; /* AveragePool */
    bool storage_order;     /* MaxPool: 1 = column-major Indices */
    /* ConvTranspose (issue 26, ops batch 2): n_* < 0 when absent */
    int n_output_padding, n_output_shape;
    int64_t output_padding[OT_PARAMS_MAX_LIST], output_shape[OT_PARAMS_MAX_LIST];
} ot_window_params;

/* ConvTranspose's geometry, which shape inference, autodiff and both backends share.
 * The transpose is the input gradient of the convolution whose input is the
 * transpose's output: spatial dim i of that convolution reads the transpose's output
 * (size out) with begin pad *pb and produces the transpose's input (size in).
 * ot_conv_transpose_out: out from the attributes as ONNX's reference computes it
 * (output_shape, else in x stride under auto_pad SAME_*, else stride x (in - 1) +
 * output_padding + the kernel's span - both pads); false on overflow or a result
 * below 1. ot_conv_transpose_pads: the begin pad (explicit pads, else auto_pad's split
 * of the total padding: SAME_UPPER puts the smaller half first, SAME_LOWER the larger,
 * as the reference does) and an end pad that gives that convolution exactly `in`
 * outputs (never negative: a shortfall below one stride is dropped by the floor);
 * false when that arithmetic overflows int64 (the shape rule refuses such a node, so
 * callers after shape inference may ignore it). */
bool ot_conv_transpose_out(const ot_window_params *wp, int nd, int i, int64_t in, int64_t k, int64_t *out);
bool ot_conv_transpose_pads(const ot_window_params *wp, int nd, int i, int64_t in, int64_t k, int64_t out, int64_t *pb,
                            int64_t *pe);

typedef enum ot_gelu_approx { OT_GELU_NONE, OT_GELU_TANH, OT_GELU_OTHER } ot_gelu_approx;

/* LeakyRelu, Gelu, Clip and their gradients */
typedef struct ot_act_params {
    float alpha;                  /* LeakyRelu: 0.01 by default */
    ot_gelu_approx approximate;   /* Gelu: "none" by default; any other string is OTHER */
    const char *approximate_name; /* as written (the node's attribute), for OTHER's error */
    /* Clip: the normalised float attributes min / max, when present (else the
     * optional inputs, read at run time) */
    bool has_min, has_max;
    float min, max;
} ot_act_params;

/* Dropout and DropoutGrad: the attributes, when present (Dropout falls back on its
 * opset-12 inputs at run time; DropoutGrad on ratio 0.5 and ctx->rng_node). */
typedef struct ot_dropout_params {
    bool has_ratio, has_training_mode, has_rng_node;
    float ratio; /* 0.5 when absent */
    bool training_mode;
    int rng_node;
} ot_dropout_params;

/* Softmax, LogSoftmax, BatchNormalization, LayerNormalization and their gradients */
typedef struct ot_norm_params {
    /* Softmax: -1, or 1 with legacy_2d (the importer's mark for opset < 13: softmax
     * over the flattened dims [axis, rank)); LayerNorm: -1 */
    int axis;
    bool legacy_2d;
    float epsilon;  /* 1e-5 */
    float momentum; /* BatchNorm: 0.9 */
    bool training_mode, unbiased_running_var;
    int num_groups; /* GroupNormalization(Grad) (issue 26): 0 when absent (InstanceNorm: one per channel) */
} ot_norm_params;

typedef enum ot_reduction { OT_REDUCTION_MEAN, OT_REDUCTION_SUM, OT_REDUCTION_NONE, OT_REDUCTION_OTHER } ot_reduction;

/* SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss and their gradients */
typedef struct ot_loss_params {
    ot_reduction reduction;     /* "mean" by default; any other string is OTHER */
    const char *reduction_name; /* as written (the node's attribute), for OTHER's error */
    bool has_ignore_index;
    int64_t ignore_index; /* compared with int64 labels: kept whole, not narrowed */
    /* LinearCrossEntropy(Grad) only: W is [V, D] (a tied embedding), and the rows of
     * logits one chunk holds (fixed by the plan: dW's summation order depends on it) */
    bool trans_w;
    int64_t chunk_rows;
} ot_loss_params;

/* ops batch 1 (issue 26): what a reduction computes (ReduceGrad: its "mode" attribute) */
typedef enum ot_reduce_mode {
    OT_RMODE_SUM, OT_RMODE_MEAN, OT_RMODE_MAX, OT_RMODE_MIN, OT_RMODE_PROD, OT_RMODE_L1, OT_RMODE_L2,
    OT_RMODE_LOG_SUM_EXP, OT_RMODE_SUM_SQUARE, OT_RMODE_ARG_MAX, OT_RMODE_ARG_MIN, OT_RMODE_OTHER
} ot_reduce_mode;

/* ReduceMean, ReduceSum; ops batch 1 (issue 26): ReduceMax .. ReduceSumSquare, ArgMax,
 * ArgMin, ReduceGrad */
typedef struct ot_reduce_params {
    int n_axes;           /* -1: no axes attribute (the opset-18 input, read at run time) */
    const int64_t *axes;  /* the node's attribute (any length; duplicates allowed) */
    bool noop_with_empty_axes;
    /* ops batch 1 (issue 26) */
    ot_reduce_mode mode;    /* from the op; ReduceGrad: its "mode" string (OTHER if unknown) */
    const char *mode_name;  /* ReduceGrad: as written, for OTHER's error */
    int axis;               /* ArgMax, ArgMin: 0 by default (not yet normalised to the rank) */
    bool keepdims;          /* 1 by default */
    bool select_last_index; /* ArgMax, ArgMin */
} ot_reduce_params;

/* Transpose, Concat, Split, Gather, GatherGrad, Shape */
typedef struct ot_layout_params {
    int axis;              /* Concat, Split, Gather, GatherGrad: 0 by default */
    int n_perm;            /* Transpose: -1 when absent (reverse the dims) */
    const int64_t *perm;   /* the node's attribute; every entry checked to fit an int */
    int n_split;           /* Split: -1 when absent */
    const int64_t *split;  /* the node's attribute */
    bool has_end;          /* Shape: end absent means the rank */
    int64_t start, end;    /* Shape: clamped to the rank at run time */
} ot_layout_params;

/* SgdStep, AdamStep (train/optim.c writes the attributes) */
typedef struct ot_optim_params {
    float momentum;     /* SGD: 0 */
    float weight_decay; /* 0 */
    bool nesterov;      /* SGD */
    float beta1, beta2; /* Adam: 0.9, 0.999 */
    float epsilon;      /* Adam: 1e-8 */
    bool decoupled;     /* Adam: AdamW's decay */
    bool eps_hf;        /* Adam: HuggingFace's eps and decay order (train/optim.h) */
} ot_optim_params;

/* HardSigmoid, IsInf, Mod and the backward ops of issue 13's pointwise math */
typedef struct ot_math_params {
    float alpha, beta;                    /* HardSigmoid(Grad): 0.2, 0.5 */
    bool detect_negative, detect_positive; /* IsInf: both by default */
    bool fmod;                            /* Mod, ModGrad: 0 by default */
    int index;                            /* MaxGrad, MinGrad: the input whose gradient */
} ot_math_params;
/* ---- layout and indexing (issue 13) ---- */
typedef enum ot_scatter_reduction {
    OT_SCATTER_NONE, OT_SCATTER_ADD, OT_SCATTER_MUL, OT_SCATTER_MAX, OT_SCATTER_MIN, OT_SCATTER_OTHER
} ot_scatter_reduction;
typedef enum ot_pad_mode { OT_PAD_CONSTANT, OT_PAD_REFLECT, OT_PAD_EDGE, OT_PAD_WRAP, OT_PAD_OTHER } ot_pad_mode;

/* Pad, PadGrad, Trilu, GatherElements, GatherElementsGrad, CumSum, ScatterND,
 * ScatterElements, GatherND */
typedef struct ot_index_params {
    int axis;                /* GatherElements (and its gradient), ScatterElements: 0 by default */
    int batch_dims;          /* GatherND: 0 by default */
    ot_scatter_reduction reduction; /* ScatterND, ScatterElements: "none" by default */
    const char *reduction_name;     /* as written, for OTHER's error */
    ot_pad_mode pad_mode;    /* Pad: "constant" by default; any other string is OTHER */
    const char *mode_name;   /* as written (the node's attribute), for OTHER's error */
    bool upper;              /* Trilu: 1 by default */
    bool exclusive, reverse; /* CumSum */
} ot_index_params;

/* RandomUniformLike, RandomUniform: the range of the draws (the output's dtype and
 * shape are the shape rule's; the `seed` attribute is not read: every random op
 * draws from the run's seed, exec/rng.h) */
typedef struct ot_random_params {
    float low, high; /* 0, 1 */
} ot_random_params;

/* ops batch 1 (issue 26): Elu, Selu, Celu, EluGrad, ThresholdedRelu(Grad). The elu
 * family as PyTorch's elu(x, alpha, scale, input_scale): x <= 0 ? negcoef *
 * expm1(x * input_scale) : poscoef * x; negcoef = alpha * scale (computed in double,
 * as PyTorch's Scalars are). Elu: alpha (1), scale 1; Selu: alpha, scale = gamma;
 * Celu: alpha, input_scale = 1 / alpha; EluGrad: its attributes alpha, scale,
 * input_scale as the gradient rule wrote them. */
typedef struct ot_unary_params {
    float alpha, scale, input_scale;
    float negcoef, poscoef;
    float threshold; /* ThresholdedRelu(Grad): alpha, 1 by default */
} ot_unary_params;
/* ---- spatial ops (issue 26, ops batch 2) ---- */
typedef enum ot_resize_mode { OT_RESIZE_NEAREST, OT_RESIZE_LINEAR, OT_RESIZE_CUBIC, OT_RESIZE_MODE_OTHER } ot_resize_mode;
typedef enum ot_resize_ctm {
    OT_CTM_HALF_PIXEL, OT_CTM_PYTORCH_HALF_PIXEL, OT_CTM_ALIGN_CORNERS, OT_CTM_ASYMMETRIC,
    OT_CTM_HALF_PIXEL_SYMMETRIC, OT_CTM_TF_CROP_AND_RESIZE, OT_CTM_OTHER
} ot_resize_ctm;
typedef enum ot_resize_nearest {
    OT_NEAREST_ROUND_PREFER_FLOOR, OT_NEAREST_ROUND_PREFER_CEIL, OT_NEAREST_FLOOR, OT_NEAREST_CEIL, OT_NEAREST_OTHER
} ot_resize_nearest;
typedef enum ot_resize_aspect { OT_ASPECT_STRETCH, OT_ASPECT_NOT_LARGER, OT_ASPECT_NOT_SMALLER, OT_ASPECT_OTHER } ot_resize_aspect;

/* Resize and ResizeGrad (ONNX's defaults: nearest, half_pixel, round_prefer_floor,
 * cubic_coeff_a -0.75); Upsample (opset < 10: the asymmetric transform and floor
 * rounding, which is what Resize-10 and PyTorch's nearest mean). "bilinear" /
 * "bicubic" (written by some old exporters) read as linear / cubic. Names kept as
 * written for the error of an OTHER. */
typedef struct ot_resize_params {
    ot_resize_mode mode;
    ot_resize_ctm ctm;
    ot_resize_nearest nearest;
    ot_resize_aspect aspect;
    const char *mode_name, *ctm_name, *nearest_name, *aspect_name;
    float cubic_a, extrapolation_value;
    bool exclude_outside, antialias;
    int n_axes; /* -1: every axis */
    int64_t axes[OT_PARAMS_MAX_LIST];
} ot_resize_params;

/* DepthToSpace, SpaceToDepth: blocksize (required, >= 1, checked by the shape rule)
 * and mode ("DCR" by default; "CRD"; anything else is mode_other) */
typedef struct ot_depth_params {
    int64_t blocksize;
    bool crd, mode_other;
    const char *mode_name;
} ot_depth_params;
/* ops3 (issue 26): RMSNormalization, RotaryEmbedding, Attention and their gradients,
 * each reading its own members (the ONNX defaults) */
typedef struct ot_xfmr_params {
    int axis;         /* RMSNormalization: -1 */
    float epsilon;    /* RMSNormalization: 1e-5 */
    int stash_type;   /* RMSNormalization: 1 (float) */
    bool interleaved; /* RotaryEmbedding: 0 */
    int num_heads;    /* RotaryEmbedding: 0 (absent; required for 3-D input) */
    int rotary_dim;   /* RotaryEmbedding: 0 (the whole head) */
    bool is_causal;   /* Attention: 0 */
    int q_num_heads, kv_num_heads; /* Attention: 0 (absent; required for 3-D inputs) */
    int qk_matmul_output_mode;     /* Attention: 0 */
    int softmax_precision;         /* Attention: 0 (absent) */
    bool has_scale;                /* Attention: absent means 1/sqrt(head size) */
    float scale, softcap;          /* Attention: softcap 0 (none) */
    float dropout_ratio;           /* Attention made by --fused-attention (autodiff/fused_attn.c):
                                    * the attention Dropout it absorbed, drawn with the
                                    * Dropout's bits (its id in attribute rng_node); 0: none */
} ot_xfmr_params;

/* ---- ops batch 4 (issue 26) ---- */
/* Einsum, EinsumGrad: the equation (the node's attribute, parsed against the operands'
 * ranks by ir/einsum.h where they are known); EinsumGrad: the operand whose gradient */
typedef struct ot_einsum_params {
    const char *equation; /* NULL when absent */
    int index;            /* EinsumGrad: 0 by default */
} ot_einsum_params;

/* TopK: axis (-1), largest (1), sorted (1); OneHot: axis (-1) */
typedef struct ot_select_params {
    int axis;
    bool largest, sorted;
} ot_select_params;

/* RNN, GRU, LSTM and RnnGrad (its "cell" attribute names the forward op). The
 * activations are ONNX's defaults (RNN: Tanh or Relu, the same in both directions);
 * any other list sets bad_activations, and the kernels refuse it, naming it. */
typedef struct ot_rnn_params {
    int cell;          /* OT_OP_RNN / OT_OP_GRU / OT_OP_LSTM; OT_OP_UNKNOWN: none */
    int hidden_size;   /* -1 when absent */
    int dirs;          /* 1, 2 (bidirectional); 0 for an unknown direction string */
    bool reverse;      /* direction "reverse" */
    const char *direction;
    bool layout1;      /* layout 1: batch first */
    bool lbr;          /* GRU: linear_before_reset */
    bool relu;         /* RNN: Relu activations */
    bool bad_activations;
    bool has_clip;     /* clip given (not supported) */
    bool input_forget; /* LSTM: input_forget = 1 (not supported) */
} ot_rnn_params;

typedef struct ot_op_params {
    ot_params_kind kind;
    union {
        ot_gemm_params gemm;
        ot_window_params window;
        ot_act_params act;
        ot_dropout_params dropout;
        ot_norm_params norm;
        ot_loss_params loss;
        ot_reduce_params reduce;
        ot_layout_params layout;
        ot_optim_params optim;
        ot_math_params math;
        ot_index_params index; /* layout and indexing (issue 13) */
        ot_random_params random; /* random sources (issue 13) */
        ot_unary_params unary;   /* ops batch 1 (issue 26) */
        ot_resize_params resize; /* spatial ops (issue 26, ops batch 2) */
        ot_depth_params depth;
        ot_xfmr_params xfmr;     /* ops3 (issue 26) */
        ot_einsum_params einsum; /* ops batch 4 (issue 26) */
        ot_select_params select; /* ops batch 4 (issue 26) */
        ot_rnn_params rnn;       /* recurrent ops (issue 26) */
    } u;
} ot_op_params;

struct ot_node;
struct ot_graph;

/* ops batch 1 (issue 26): "max", "prod", ... (ReduceGrad's mode attribute), "other". */
const char *ot_reduce_mode_name(ot_reduce_mode m);

/* Fills *p from node's attributes (p may be &node->params). OT_E_MODEL naming the node
 * for an integer attribute out of range. Ops without parameters get OT_PARAMS_NONE. */
ot_status ot_node_resolve_params(const struct ot_node *node, ot_op_params *p, ot_error *err);

/* Resolves every node of g that is not removed; the first failure is returned. */
ot_status ot_graph_resolve_params(struct ot_graph *g, ot_error *err);

/* The node's resolved params, or, for a node never resolved (one a test builds by
 * hand) or whose op changed since, *scratch filled from its attributes. *out points
 * at one of the two. */
ot_status ot_node_params(const struct ot_node *node, ot_op_params *scratch, const ot_op_params **out, ot_error *err);

#endif
