/* importer.h — ONNX file ⇄ IR: loading a ModelProto (every tensor storage form,
 * external data confined to the model's folder), opset normalisation, shape
 * inference with constant folding, and the exporter that writes a model back with
 * only its initializer values changed. */
#ifndef OT_IMPORTER_H
#define OT_IMPORTER_H

#include "ir.h"

typedef struct ot_unsupported_op {
    char *op_type;   /* e.g. "Loop" or "com.microsoft:FusedGemm" */
    char **nodes;    /* names of the nodes using it (graph input names for OT_UNSUP_INPUT_DTYPE) */
    int n_nodes;
    int reason;      /* an ot_unsupported_reason */
} ot_unsupported_op;

typedef enum ot_unsupported_reason {
    OT_UNSUP_OP = 0,           /* op_type not in ir/ops.def (or a non-default domain) */
    OT_UNSUP_NESTED_GRAPH = 1, /* a graph / sparse / type attribute (If, Loop, Scan, ...) */
    OT_UNSUP_INPUT_DTYPE = 2,  /* op_type holds "input dtype <name>"; nodes the inputs */
    OT_UNSUP_INIT_DTYPE = 3,   /* op_type holds "initializer dtype <name>"; nodes the initializers */
} ot_unsupported_reason;

typedef struct ot_model {
    char *path;          /* as given by the user */
    char *dir;           /* folder external data is resolved against */
    void *proto;         /* Onnx__ModelProto *, owned; only importer/ looks inside */
    ot_graph *graph;
    int64_t ir_version;
    char *producer_name, *producer_version;
    int64_t opset;       /* default-domain opset */
    ot_unsupported_op *unsupported; /* every unsupported op, with all nodes using it */
    int n_unsupported;
} ot_model;

typedef struct ot_import_options {
    /* Keep nodes whose op is not supported (as OT_OP_UNKNOWN) instead of failing;
     * `info` uses this to list them all. */
    bool allow_unsupported;
    /* Skip shape inference (and constant folding). */
    bool no_shape_inference;
    /* For callers that only plan (`onnxtrain plan`, `--batch-size auto` probing, the
     * memory advice): floating-point initializers that become trainable params
     * (OT_VK_PARAM) and hold more than OT_SKIP_PARAM_MIN_BYTES get their dtype, shape
     * and nbytes but no data, so the weights are neither read nor held. Everything that
     * can be checked without reading them still is (dims, sizes, the storage form,
     * external files' sizes and confinement). Smaller ones are loaded: a tiny float
     * initializer may be a Clip bound or a Dropout ratio that normalisation reads.
     * Such a model can be planned, not run (the executor refuses params without data)
     * and not saved (ot_model_save refuses it). */
    bool skip_param_data;
    /* Evaluator for constant folding, kept in the graph for later shape inference
     * (binding dims). NULL folds only Constant and Shape nodes; every command passes
     * ot_cpu_fold_eval (kernels/kernel.h). */
    ot_fold_eval_fn fold_eval;
} ot_import_options;

/* Float params up to this size are loaded even with skip_param_data. */
#define OT_SKIP_PARAM_MIN_BYTES 1024

/* Loads, normalises and (unless disabled) shape-infers a model. On failure *out is
 * NULL and err names the file and the node or value at fault. Without
 * allow_unsupported, unsupported ops fail with OT_E_UNSUPPORTED listing all of them. */
ot_status ot_model_load(const char *path, const ot_import_options *opt, ot_model **out, ot_error *err);
/* Same, from bytes in memory (fuzzing, tests); dir resolves external data (may be NULL: refused). */
ot_status ot_model_load_buffer(const void *data, size_t size, const char *name, const char *dir,
                               const ot_import_options *opt, ot_model **out, ot_error *err);
void ot_model_free(ot_model *m);

/* One TensorProto (an Onnx__TensorProto *) → a new host tensor in its own dtype,
 * little-endian, from any storage form; model_dir resolves external data (NULL:
 * external data refused). Errors name the tensor. */
ot_status ot_tensor_from_proto(const void *tensor_proto, const char *model_dir, ot_tensor **out, ot_error *err);
/* Reads a serialized TensorProto file (ONNX backend tests' input_0.pb); *name (may be
 * NULL) receives the tensor's name, malloc'd. */
ot_status ot_tensor_load_pb(const char *path, ot_tensor **out, char **name, ot_error *err);
/* The message listing every unsupported op as ot_model_load reports it (e.g. "2
 * unsupported ops: Loop (node 'l'), NonZero (nodes 'a', 'b')"), malloc'd; NULL if none. */
char *ot_model_unsupported_str(const ot_model *m);

/* The external data files the model's tensors name (main-graph initializers and node
 * attribute tensors), each as MODEL_DIR/LOCATION once, malloc'd; *n 0 when there are
 * none. Free with ot_model_external_files_free. Only OT_E_MEMORY can fail. */
ot_status ot_model_external_files(const ot_model *m, char ***paths, int *n, ot_error *err);
void ot_model_external_files_free(char **paths, int n);
/* Before writing the model model_path with external data: data_path (NULL: the one
 * data file PATH.data) may be written over only when it does not exist or when the
 * model now at model_path reads its data from it (it is that model's, written by an
 * earlier export under this name). Any other existing file is OT_E_USAGE naming it
 * and what to do: the exporter never replaces a file the user did not name. */
ot_status ot_model_data_file_check(const char *model_path, const char *data_path, ot_error *err);

/* Writes the model back: the original graph, opset, names, metadata and doc strings;
 * each initializer takes the current data of its IR value (params and state).
 * Written to PATH.tmp-XXXX then renamed. Same as ot_model_save_ex with no options. */
ot_status ot_model_save(const ot_model *m, const char *path, ot_error *err);

/* Where the exporter takes an initializer's bytes when its IR value holds none (the
 * weights live in an executor's arena): host_ptr (may be NULL, or return NULL) gives
 * them in place; otherwise read copies bytes [offset, offset + n) of the value into
 * dst, a staging buffer of at most OT_EXPORT_STAGE_BYTES. Either way the exporter
 * holds no copy of the weights. value_id indexes m->graph. */
typedef struct ot_export_source {
    const void *(*host_ptr)(void *user, int value_id);
    ot_status (*read)(void *user, int value_id, uint64_t offset, void *dst, size_t n, ot_error *err);
    void *user;
} ot_export_source;

#define OT_EXPORT_STAGE_BYTES ((size_t)4 << 20)

typedef struct ot_export_options {
    /* Write the initializers as external data even when the model fits in protobuf's
     * 2 GB limit (above it, they always are). */
    bool external_data;
    /* NULL: every initializer's bytes from its IR value. */
    const ot_export_source *source;
} ot_export_options;

/* ot_model_save with options. External data keeps the source's layout: the
 * initializers stored externally in the source are written externally, to one file
 * PATH.data when the source used one file, or to a file per tensor
 * (PATH.<tensor>.data) when it used several; a source without external data writes
 * every initializer of 1 KiB or more to PATH.data. Locations are file names relative
 * to PATH's folder (never '/' or '..'), offsets aligned to 4 KiB. The .onnx and its
 * data files appear together or not at all (see docs/training.md, "External data"). */
ot_status ot_model_save_ex(const ot_model *m, const char *path, const ot_export_options *opt, ot_error *err);

/* Writes tensors[i] (float32) as initializers names[i] of a new ONNX model (IR 8,
 * opset 17) with no nodes, inputs or outputs, and meta[2k] = meta[2k + 1] as its
 * metadata_props (n_meta pairs): how `--lora-save X.onnx` stores adapters. Atomic. */
ot_status ot_export_tensors(const char *path, const char *graph_name, const char *const *names,
                            const ot_tensor *const *tensors, int n, const char *const *meta, int n_meta,
                            ot_error *err);

/* Shape inference over the whole graph with constant folding of shape subgraphs
 * (Shape → Gather → Concat → Reshape, Range, Expand, ConstantOfShape, ...), folding
 * through g->fold_eval. Symbolic dims stay symbolic unless bound. */
ot_status ot_shape_infer(ot_graph *g, ot_error *err);
/* True when op has a shape rule (the table in importer/shape_rules.c): every op of
 * ops.def does; OT_OP_UNKNOWN does not (such nodes keep their declared shapes). */
bool ot_shape_has_rule(ot_op op);
/* Binds a symbolic dim (e.g. "batch" = 8) and re-runs shape inference so every
 * value whose shape depended on it becomes static. Unknown name: OT_E_SHAPE. */
ot_status ot_graph_bind_dim(ot_graph *g, const char *sym, int64_t value, ot_error *err);
/* Binds every NAME=SIZE of a comma-separated spec ("batch=8,seq=16", the CLI's
 * --bind). Malformed spec: OT_E_USAGE; unknown name: OT_E_SHAPE listing the model's. */
ot_status ot_graph_bind_dims_from_string(ot_graph *g, const char *spec, ot_error *err);
/* OT_E_SHAPE naming the first live value whose shape is not static and the symbolic
 * dims still to bind; OT_OK when a plan can be made. */
ot_status ot_graph_require_static(const ot_graph *g, ot_error *err);

#endif
