/* ir.h — onnxtrain's intermediate representation: status and errors, dtypes, shapes,
 * values, nodes, attributes and the graph that every pass (importer, autodiff, remat,
 * planner, executor, exporter) reads and rewrites.
 *
 * Values and nodes live in growable arrays inside ot_graph and are referred to by
 * integer id (their index), never by pointer, because adding a value may move the
 * array. An absent optional input is -1. Removed nodes stay in the array with
 * `removed` set so ids remain stable; passes skip them.
 */
#ifndef OT_IR_H
#define OT_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- status and errors ---------------------------------------------------- */

/* Every status is also the CLI's exit code (see README.md, "Exit codes"). */
typedef enum ot_status {
    OT_OK = 0,
    OT_E_USAGE = 2,       /* bad command line */
    OT_E_IO = 3,          /* a file cannot be read or written */
    OT_E_PARSE = 4,       /* not a valid ONNX protobuf / .npy file */
    OT_E_MODEL = 5,       /* a well-formed file describing an invalid model */
    OT_E_UNSUPPORTED = 6, /* an op, dtype or feature onnxtrain does not support */
    OT_E_SHAPE = 7,       /* shapes that do not agree or cannot be bound */
    OT_E_DATA = 8,        /* input data of the wrong dtype, shape or count */
    OT_E_MEMORY = 9,      /* allocation failed or a memory budget cannot be met */
    OT_E_NUMERICS = 10,   /* NaN or Inf */
    OT_E_MISMATCH = 11,   /* verify: results differ */
    OT_E_DEVICE = 12,     /* GPU missing or a CUDA call failed */
    OT_E_PEER = 13,       /* distributed run: another rank failed, hangs, or MPI failed */
    OT_E_INTERNAL = 70,   /* a bug in onnxtrain */
} ot_status;

typedef struct ot_error {
    ot_status code;
    char msg[1024];
} ot_error;

/* Sets err (may be NULL) to code and the formatted message; returns code. */
ot_status ot_fail(ot_error *err, ot_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prepends context ("model.onnx: ") to an existing message; returns err->code. */
ot_status ot_error_prefix(ot_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
const char *ot_status_name(ot_status s);

/* Allocation helpers: abort-free; return NULL on failure like malloc. */
void *ot_xcalloc(size_t n, size_t size);
char *ot_strdup(const char *s);

/* ---- dtypes (values are ONNX TensorProto.DataType codes) ------------------ */

typedef enum ot_dtype {
    OT_UNDEFINED = 0,
    OT_F32 = 1,
    OT_U8 = 2,
    OT_I8 = 3,
    OT_I32 = 6,
    OT_I64 = 7,
    OT_STRING = 8,
    OT_BOOL = 9,
    OT_F16 = 10,
    OT_F64 = 11,
    OT_BF16 = 16,
} ot_dtype;

size_t ot_dtype_size(ot_dtype t);  /* 0 for undefined or unsupported */
const char *ot_dtype_name(ot_dtype t);
bool ot_dtype_is_float(ot_dtype t);
bool ot_dtype_supported(ot_dtype t); /* one of the dtypes listed above, not string */

/* ---- shapes --------------------------------------------------------------- */

#define OT_MAX_RANK 8

/* rank < 0: unknown rank. dim[i] < 0: unknown or symbolic; sym[i] >= 0 names the
 * symbolic dim graph->syms[sym[i]] (e.g. "batch"), -1 otherwise. */
typedef struct ot_shape {
    int rank;
    int64_t dim[OT_MAX_RANK];
    int32_t sym[OT_MAX_RANK];
} ot_shape;

ot_shape ot_shape_make(int rank, const int64_t *dims);
ot_shape ot_shape_unknown(void);
bool ot_shape_is_static(const ot_shape *s);      /* known rank, all dims >= 0 */
int64_t ot_shape_numel(const ot_shape *s);        /* -1 if not static; saturates at INT64_MAX */
/* One axis of a Slice (both backends' kernels and plan/views.c's Slice views), of size dim, step != 0: start and end
 * made non-negative (+dim) and clamped as ONNX says (to [0, dim] for a positive step;
 * start to [0, dim - 1] and end to [-1, dim - 1] for a negative one); returns the
 * element count, the clamped start in *first. Shape inference applies the same rule
 * with overflow checks (importer/shape_rules_tensor.c). */
int64_t ot_slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first);
bool ot_shape_equal(const ot_shape *a, const ot_shape *b);
/* Writes "[batch,3,32,32]" (needs graph for symbol names; may be NULL). */
struct ot_graph;
char *ot_shape_str(const struct ot_graph *g, const ot_shape *s, char *buf, size_t n);

/* A dense host tensor: used for initializers, folded constants, attribute tensors
 * and kernel arguments. `data` is row-major, little-endian. */
typedef struct ot_tensor {
    ot_dtype dtype;
    ot_shape shape; /* always static */
    void *data;
    size_t nbytes;
} ot_tensor;

/* ---- ops (generated from ops.def) ----------------------------------------- */

enum {
    OT_T_DIFF = 1 << 0,        /* has a gradient rule (autodiff/grad_table.c) */
    OT_T_ELEMENTWISE = 1 << 1, /* output[i] depends on input[i] only */
    OT_T_BROADCAST = 1 << 2,   /* multidirectional broadcasting of inputs */
    OT_T_INPLACE = 1 << 3,     /* output may share the first input's buffer */
    OT_T_HEAVY = 1 << 4,       /* matmul / conv: keep rather than recompute */
    OT_T_NORM = 1 << 5,        /* normalisation / softmax: cheap to recompute */
    OT_T_VIEW = 1 << 6,        /* same bytes, new shape (Reshape, Flatten, ...) */
    OT_T_LAYOUT = 1 << 7,      /* data movement (Transpose, Concat, Slice, ...) */
    OT_T_SHAPE = 1 << 8,       /* computes shapes / constants; folded at import */
    OT_T_REDUCE = 1 << 9,
    OT_T_RANDOM = 1 << 10,     /* draws from the Philox generator */
    OT_T_STATEFUL = 1 << 11,   /* updates state (BatchNorm running stats) */
    OT_T_LOSS = 1 << 12,
    OT_T_INTERNAL = 1 << 13,   /* onnxtrain op, domain ai.onnxtrain, never exported */
    OT_T_OPTIMIZER = 1 << 14,
};

typedef enum ot_op {
    OT_OP_UNKNOWN = 0, /* an op onnxtrain does not support; node->op_type keeps its name */
#define OT_OP(e, name, mi, ma, mo, mxo, tr) OT_OP_##e,
#include "ops.def"
#undef OT_OP
    OT_OP_COUNT
} ot_op;

typedef struct ot_op_info {
    const char *name;
    int min_inputs, max_inputs;   /* max -1: variadic */
    int min_outputs, max_outputs; /* max -1: variadic */
    unsigned traits;
} ot_op_info;

const ot_op_info *ot_op_get(ot_op op);
const char *ot_op_name(ot_op op);
/* Looks up an ONNX op_type in the default domain (or an internal op by name when
 * internal is true). Returns OT_OP_UNKNOWN when not in the table. */
ot_op ot_op_from_name(const char *op_type, bool internal);
bool ot_op_has(ot_op op, unsigned trait);

/* ---- attributes ----------------------------------------------------------- */

typedef enum ot_attr_type {
    OT_ATTR_UNDEFINED = 0,
    OT_ATTR_FLOAT = 1,
    OT_ATTR_INT = 2,
    OT_ATTR_STRING = 3,
    OT_ATTR_TENSOR = 4,
    OT_ATTR_GRAPH = 5, /* kept only to report as unsupported */
    OT_ATTR_FLOATS = 6,
    OT_ATTR_INTS = 7,
    OT_ATTR_STRINGS = 8,
    OT_ATTR_OTHER = 99, /* sparse tensors, type protos, lists of tensors/graphs */
} ot_attr_type; /* values match ONNX AttributeProto.AttributeType where they exist */

typedef struct ot_attr {
    char *name;
    ot_attr_type type;
    float f;
    int64_t i;
    char *s;
    int n; /* element count of floats / ints / strings */
    float *floats;
    int64_t *ints;
    char **strings;
    ot_tensor *t;
} ot_attr;

/* ---- values and nodes ----------------------------------------------------- */

typedef enum ot_value_kind {
    OT_VK_ACTIVATION = 0, /* produced by a node */
    OT_VK_INPUT,          /* graph input fed by data */
    OT_VK_PARAM,          /* trainable initializer */
    OT_VK_STATE,          /* non-trainable state updated by training (BN running stats) */
    OT_VK_CONSTANT,       /* initializer or folded constant that never changes */
    OT_VK_GRADIENT,       /* produced by the backward pass */
    OT_VK_OPT_STATE,      /* optimizer state (momentum, Adam moments) */
} ot_value_kind;

typedef enum ot_phase {
    OT_PHASE_FORWARD = 0,
    OT_PHASE_LOSS,
    OT_PHASE_BACKWARD,
    OT_PHASE_RECOMPUTE,
    OT_PHASE_OPTIMIZER,
} ot_phase;

const char *ot_value_kind_name(ot_value_kind k);
const char *ot_phase_name(ot_phase p);

typedef struct ot_value {
    int id;
    char *name;
    ot_dtype dtype;
    ot_shape shape;
    ot_value_kind kind;
    bool is_graph_output;
    int producer;    /* node id, -1 for inputs, initializers and constants */
    int *consumers;  /* node ids, one entry per input slot that reads this value */
    int n_consumers, cap_consumers;
    /* Host data for initializers and constants (owned), NULL otherwise. */
    void *data;
    size_t nbytes;
    int init_index;  /* index in the source ModelProto's initializer list, -1 if none */
    char *doc;       /* doc_string of the source ValueInfo/initializer, may be NULL */
} ot_value;

#include "op_params.h" /* ot_op_params: the typed attributes kernels read */

/* What PyTorch's dynamo exporter recorded of the call a node was traced from (node
 * metadata "pkg.torch.onnx.fx_node"): nothing (another exporter, or a node onnxtrain
 * made), a call that reads a PyTorch parameter (a `%p_` placeholder among its
 * arguments), or one that reads none. ot_param_rule uses it to tell a parameter from
 * a table the exporter's optimizer folded (docs/training.md). GROUP_NORM: a call to
 * group_norm that reads parameters; the exporter writes it as InstanceNormalization
 * with a scale of ones and a bias of zeros of its own (one per group), then Mul / Add
 * by the parameters, so that InstanceNormalization's scale and bias are constants. */
typedef enum { OT_TRACE_NONE = 0, OT_TRACE_PARAM, OT_TRACE_NO_PARAM, OT_TRACE_GROUP_NORM } ot_trace;

typedef struct ot_node {
    int id;
    ot_op op;
    char *op_type; /* name as read (kept for unsupported ops and for export) */
    char *domain;  /* "" for the default ONNX domain */
    char *name;
    int *inputs;   /* value ids; -1 = absent optional input */
    int n_inputs;
    int *outputs;  /* value ids; -1 = absent optional output */
    int n_outputs;
    ot_attr *attrs;
    int n_attrs;
    ot_phase phase;
    int orig_node;  /* for recompute clones: the node this one copies; else -1 */
    int src_index;  /* index in the source GraphProto's node list, -1 if created */
    bool removed;   /* folded away or rewritten; skipped by every pass */
    ot_trace trace; /* the dynamo exporter's record of the traced call (above) */
    ot_op_params params; /* filled by ot_graph_resolve_params (ir/op_params.h) */
} ot_node;

/* Evaluates one node on host tensors (in/out as kernels/kernel.h describes them),
 * for constant folding during shape inference. rng_node keys a random op's draws. The
 * importer sits below the kernels, so whoever builds a graph injects one
 * (ot_cpu_fold_eval, kernels/kernel.h). */
typedef ot_status (*ot_fold_eval_fn)(const struct ot_node *node, int rng_node, const ot_tensor *in,
                                     ot_tensor *out, ot_error *err);

typedef struct ot_graph {
    char *name;
    ot_value *values;
    int n_values, cap_values;
    ot_node *nodes;
    int n_nodes, cap_nodes;
    int *inputs;  /* value ids of graph inputs fed by data (initializers excluded) */
    int n_inputs;
    int *outputs; /* value ids of graph outputs */
    int n_outputs;
    char **syms;         /* names of symbolic dims */
    int64_t *sym_values; /* bound value of each symbol, -1 when unbound */
    int n_syms;
    int64_t opset;       /* version of the default ONNX domain */
    /* Folds compute nodes whose inputs are all constant (NULL: only Constant and Shape
     * nodes fold, nothing is computed). Set from ot_import_options.fold_eval. */
    ot_fold_eval_fn fold_eval;
    /* --fuse-update (train/session.c sets it on the training graph): each optimizer
     * node runs as soon as its gradient is complete and every other reader of the
     * param and state it updates has run, and the gradient is a transient freed there
     * (plan/schedule.h, plan/planner.h). false: the optimizer runs after the whole
     * backward pass and gradients are pinned. */
    bool fuse_update;
    /* With fuse_update under MPI (train/train_dist.h): the rank count whose gradients
     * each fused update sums. Above 1, every param gradient has a block of sum_ranks - 1
     * receive slots beside its own and each group of updates waits one group later
     * (plan/schedule.h, plan/planner.h), so the sums overlap the backward pass. */
    int sum_ranks;
} ot_graph;

/* ---- graph construction --------------------------------------------------- */

ot_graph *ot_graph_new(const char *name);
void ot_graph_free(ot_graph *g);

/* Adds a value; returns its id or -1 on allocation failure. name is copied. */
int ot_graph_add_value(ot_graph *g, const char *name, ot_dtype dtype, const ot_shape *shape,
                       ot_value_kind kind);
/* Finds a value by name, -1 if none. Linear scan: for importers, not hot paths. */
int ot_graph_find_value(const ot_graph *g, const char *name);
/* Adds a value with a name made unique from `base` (e.g. "x_grad", "x_grad_1"). */
int ot_graph_add_value_unique(ot_graph *g, const char *base, ot_dtype dtype,
                              const ot_shape *shape, ot_value_kind kind);
/* Adds a node reading `inputs` and writing `outputs` (value ids, -1 = absent);
 * records producer / consumers. Returns the node id or -1. */
int ot_graph_add_node(ot_graph *g, ot_op op, const char *name, const int *inputs, int n_inputs,
                      const int *outputs, int n_outputs, ot_phase phase);
/* The blocks a node or value owns, for the two functions below: malloc'd, the id
 * arrays with room for the node's inputs and outputs (at least one entry each), the
 * consumer list NULL or cap_consumers entries (its contents ignored). */
typedef struct ot_node_blocks {
    char *op_type, *domain, *name;
    int *inputs, *outputs;
} ot_node_blocks;
typedef struct ot_value_blocks {
    char *name;
    int *consumers;
    int cap_consumers;
} ot_value_blocks;
/* Frees a node's blocks (not its attributes): a node that was never added, a removed
 * clone's, a freed graph's. */
void ot_node_blocks_free(ot_node_blocks *b);
/* ot_graph_add_node and ot_graph_add_value with the blocks given instead of allocated
 * (remat's measurements reuse a removed clone's: allocating and freeing thousands of
 * small blocks per measurement was a large share of its time); the strings are taken
 * as they are. The graph owns the blocks once the node or value is added; on -1 from a
 * full graph (nothing added) they stay the caller's. */
int ot_graph_add_node_blocks(ot_graph *g, ot_op op, const ot_node_blocks *b, const int *inputs, int n_inputs,
                             const int *outputs, int n_outputs, ot_phase phase);
int ot_graph_add_value_blocks(ot_graph *g, const ot_value_blocks *b, ot_dtype dtype, const ot_shape *shape,
                              ot_value_kind kind);
/* Marks a node removed and unlinks it from its values' producer/consumer lists. */
void ot_graph_remove_node(ot_graph *g, int node_id);
/* Replaces input slot `slot` of node with value `new_value`, fixing consumer lists. */
void ot_graph_set_input(ot_graph *g, int node_id, int slot, int new_value);
/* Recomputes every value's producer and consumers from the node list. */
int ot_graph_relink(ot_graph *g);
int ot_graph_add_sym(ot_graph *g, const char *name); /* existing id if already there */
int ot_graph_find_sym(const ot_graph *g, const char *name);
/* A deep copy of g with the same value, node and symbol ids: what a plan binds and
 * extends while g itself stays as imported. with_data false leaves every value's data
 * NULL (nbytes kept), for a copy that is only planned or that borrows the weights.
 * NULL when out of memory. */
ot_graph *ot_graph_clone(const ot_graph *g, bool with_data);
/* Gives back the node and value arrays' capacity beyond their entries (a graph that
 * is done growing: a session's before its steps). Moves the arrays: no pointer into
 * them may be held across it. Adding to g afterwards grows them again. */
void ot_graph_shrink(ot_graph *g);
/* Attaches a copy of data to a value (initializers and constants). */
int ot_value_set_data(ot_value *v, const void *data, size_t nbytes);

/* ---- attributes ----------------------------------------------------------- */

/* Setters replace an attribute of the same name. Return 0 or -1 on allocation failure. */
int ot_node_set_attr_int(ot_node *n, const char *name, int64_t v);
int ot_node_set_attr_float(ot_node *n, const char *name, float v);
int ot_node_set_attr_string(ot_node *n, const char *name, const char *v);
int ot_node_set_attr_ints(ot_node *n, const char *name, const int64_t *v, int count);
int ot_node_set_attr_strings(ot_node *n, const char *name, const char *const *v, int count);
int ot_node_set_attr_floats(ot_node *n, const char *name, const float *v, int count);
/* Takes ownership of t (and its data). */
int ot_node_set_attr_tensor(ot_node *n, const char *name, ot_tensor *t);
/* Copies all attributes of src onto dst (used by gradient rules and recompute clones). */
int ot_node_copy_attrs(ot_node *dst, const ot_node *src);
const ot_attr *ot_node_attr(const ot_node *n, const char *name);
int64_t ot_node_attr_int(const ot_node *n, const char *name, int64_t dflt);
float ot_node_attr_float(const ot_node *n, const char *name, float dflt);
const char *ot_node_attr_string(const ot_node *n, const char *name, const char *dflt);
/* Returns the ints (and count) or NULL when absent. */
const int64_t *ot_node_attr_ints(const ot_node *n, const char *name, int *count);
void ot_node_remove_attr(ot_node *n, const char *name);
void ot_attr_free(ot_attr *a);

void ot_tensor_free(ot_tensor *t); /* frees data and the struct */
ot_tensor *ot_tensor_new(ot_dtype dtype, const ot_shape *shape); /* zeroed data */

/* ---- checks and dumps ----------------------------------------------------- */

/* Single producer per value, consumers consistent, ids in range, acyclic, arity
 * within ops.def limits, input dtypes/shapes consistent where known.
 * On failure names the node or value. */
ot_status ot_graph_verify(const ot_graph *g, ot_error *err);
/* Topological order of live nodes; order must hold g->n_nodes ints; returns the count,
 * or -1 if there is a cycle (cycle_node set to a node on it). */
int ot_graph_topo_order(const ot_graph *g, int *order, int *cycle_node);
void ot_graph_dump_text(const ot_graph *g, FILE *f);
void ot_graph_dump_dot(const ot_graph *g, FILE *f);

#endif
