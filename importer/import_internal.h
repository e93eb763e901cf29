/* import_internal.h — declarations shared by the importer's own files (load, source,
 * skeleton, tensor, external data, attribute checks, normalisation, export). Only importer/ includes
 * this header: it exposes the protobuf-c types that the rest of onnxtrain never sees. */
#ifndef OT_IMPORT_INTERNAL_H
#define OT_IMPORT_INTERNAL_H

#include "importer.h"
#include "onnx.pb-c.h"

/* Tensors above this many bytes are refused before anything is allocated: far more
 * than any model onnxtrain can train, and small enough that a corrupt dim cannot make
 * us ask the allocator for exabytes. */
#define OT_MAX_TENSOR_BYTES (((uint64_t)1) << 34)

/* Protobuf cannot encode or decode a message over 2 GiB, so no ONNX file (or serialized
 * TensorProto) is larger; weights beyond that live in external data files. */
#define OT_MAX_PROTO_FILE_BYTES ((uint64_t)INT32_MAX)
/* OT_E_PARSE saying path is over that limit. */
ot_status ot_imp_too_big_for_protobuf(const char *path, ot_error *err);

/* Reads a whole file into a malloc'd buffer (NUL-terminated for convenience).
 * Missing/unreadable: OT_E_IO naming the path. */
ot_status ot_imp_read_file(const char *path, uint8_t **data, size_t *size, ot_error *err);

/* The bytes of a model being loaded (source.c): a caller's buffer, or a regular file read
 * by offset and never whole. Not thread-safe (a file source has one read-ahead window). */
typedef struct ot_imp_src {
    const uint8_t *mem; /* the bytes of a memory source */
    int fd;             /* the file of a file source; -1 for a memory source */
    uint64_t size;
    const char *name;   /* for messages; not owned */
    uint8_t *win;       /* a file source's read-ahead window for ot_imp_src_peek */
    uint64_t win_off;
    size_t win_len;
} ot_imp_src;
void ot_imp_src_memory(ot_imp_src *s, const void *data, size_t size, const char *name);
/* Opens a regular file of at most OT_MAX_PROTO_FILE_BYTES; OT_E_IO or OT_E_PARSE naming path. */
ot_status ot_imp_src_open(ot_imp_src *s, const char *path, ot_error *err);
void ot_imp_src_close(ot_imp_src *s);
/* Exactly n bytes at off into dst; a file that became shorter is OT_E_IO. */
ot_status ot_imp_src_read(ot_imp_src *s, uint64_t off, void *dst, size_t n, ot_error *err);
/* *p points at the bytes from off on, *avail of them (at least min(want, what is left)
 * when the window allows; 0 at the end); valid until the next call. */
ot_status ot_imp_src_peek(ot_imp_src *s, uint64_t off, size_t want, const uint8_t **p, size_t *avail, ot_error *err);
/* The whole source in a malloc'd, NUL-terminated buffer. */
ot_status ot_imp_src_read_all(ot_imp_src *s, uint8_t **data, ot_error *err);

/* How deep protobuf messages may nest in a model (protobuf's own default recursion
 * limit): a valid model needs a handful of levels per nested graph or type, a crafted
 * one nests thousands and overflows protobuf-c's recursive unpacker. */
#define OT_IMP_MAX_NESTING 100
/* Walks the message in src (of type root: a ModelProto, or a TensorProto file) at the
 * wire level before it is unpacked (wire_check.c):
 * OT_E_PARSE for messages nested deeper than OT_IMP_MAX_NESTING, OT_E_MODEL for a NUL
 * byte inside a string field, each naming the file and where. Bytes that do not decode
 * are left to protobuf-c. */
ot_status ot_imp_wire_check(ot_imp_src *src, const ProtobufCMessageDescriptor *root, ot_error *err);

/* Where the raw_data of one initializer of the main graph lies in the source, when the
 * skeleton left it out (present); see skeleton.c. */
typedef struct ot_imp_raw_ref {
    uint64_t offset, len;
    bool present;
} ot_imp_raw_ref;
/* Writes the ModelProto in src without its graph's initializer payloads into *skel
 * (malloc'd) and their places into *refs (malloc'd, one per graph.initializer, in
 * order). Unusual bytes leave *skel NULL with OT_OK: unpack the whole source then. */
ot_status ot_imp_skeleton(ot_imp_src *src, uint8_t **skel, size_t *skel_len, ot_imp_raw_ref **refs, size_t *n_refs,
                          ot_error *err);
/* Every check ot_imp_tensor_from_proto makes before it reads a byte: dtype, dims and
 * size limits, segments, and that the storage form (raw_data as raw records it, typed
 * fields, or an external file, sized without reading it) holds exactly the bytes the
 * dims need. Gives the shape and byte size; reads and allocates nothing. */
ot_status ot_imp_tensor_check(const Onnx__TensorProto *t, const char *model_dir, const ot_imp_raw_ref *raw,
                              ot_shape *shape, uint64_t *nbytes, ot_error *err);
/* ot_tensor_from_proto for a TensorProto whose raw_data the skeleton left out: raw
 * (when present) stands for it and its bytes are read from src into the new tensor. */
ot_status ot_imp_tensor_from_proto(const Onnx__TensorProto *t, const char *model_dir, ot_imp_src *src,
                                   const ot_imp_raw_ref *raw, ot_tensor **out, ot_error *err);

/* Name of an ONNX TensorProto.DataType code, including ones onnxtrain lacks. */
const char *ot_imp_onnx_dtype_name(int32_t code);

/* Number of elements and bytes of a TensorProto from its dims and dtype, refusing
 * negative dims, rank above OT_MAX_RANK, overflow and absurd sizes. */
ot_status ot_imp_tensor_geometry(const Onnx__TensorProto *t, const char *tname, ot_shape *shape,
                                 uint64_t *numel, uint64_t *nbytes, ot_error *err);

/* Reads an externally stored tensor's bytes (exactly nbytes) into dst. `dir` is the
 * model's folder (NULL: refused). Paths are confined to that folder. */
ot_status ot_imp_external_read(const Onnx__TensorProto *t, const char *tname, const char *dir, void *dst,
                               size_t nbytes, ot_error *err);
/* Total bytes (declared length, or file size minus offset) of an external tensor without
 * reading it; used by the exporter's 2 GB check. Same checks as ot_imp_external_read. */
ot_status ot_imp_external_size(const Onnx__TensorProto *t, const char *tname, const char *dir,
                               uint64_t *nbytes, ot_error *err);

/* ---- writing external data (external.c) ---- */
typedef struct ot_atomic_file ot_atomic_file;
/* Makes a model file and its data files appear together: flushes every stream, then
 * renames the data files into place and the model last (ot_atomic_commit each). When
 * a data file would replace an existing file, an existing `model_path` is removed
 * first, so no reader ever pairs the old model with the new data. On failure every
 * data file already renamed is removed again (unless the model file then exists: the
 * new one may be in place) and the rest are aborted. Frees every handle. */
ot_status ot_imp_commit_with_data(ot_atomic_file *model, const char *model_path, ot_atomic_file **data,
                                  char **data_paths, int n_data, ot_error *err);
/* The location a data file of the model at `model_path` takes: a file name in the
 * model's folder made of the model's file name, `tensor` (NULL: one file for all) with
 * every character but [A-Za-z0-9._-] replaced by '_' (at most 100 of them) and
 * ".data", with "-K" before ".data" when `k` >= 0. malloc'd; NULL when out of memory. */
char *ot_imp_data_location(const char *model_path, const char *tensor, int k);

/* Appends one AttributeProto to n as an ot_attr; *nested is set for graph, sparse and
 * type attributes (the node is then reported as unsupported). */
ot_status ot_imp_convert_attr(const char *file, const char *dir, ot_node *n, const Onnx__AttributeProto *ap,
                              bool *nested, ot_error *err);
/* Adds `node` under `op_type` (and reason) to the model's unsupported list. */
ot_status ot_imp_note_unsupported(ot_model *m, const char *op_type, const char *node, int reason, ot_error *err);

/* The model's opset for the default domain (opset.c), checked as onnx.checker does:
 * declared (from IR version 3 on), between 1 and a sane maximum, and new enough for
 * every op the main graph uses; OT_E_MODEL naming the file (and node) otherwise. */
ot_status ot_imp_model_opset(const Onnx__ModelProto *mp, const char *file, int64_t *opset, ot_error *err);

/* The unsupported list (ot_model_unsupported_str) as one error message of at most
 * budget bytes, never cut: when the whole list is longer, every op type with its
 * count, then node names while they fit, then how many more and that `onnxtrain
 * info` lists them all. malloc'd; NULL when out of memory. */
char *ot_imp_unsupported_summary(const ot_model *m, const char *file, size_t budget);

/* Checks the types of the attributes onnxtrain reads, for supported ops. */
ot_status ot_imp_check_attrs(const ot_graph *g, const ot_node *n, ot_error *err);

/* True when v's contents are known at import but were not loaded: an initializer read
 * with ot_import_options.skip_param_data, or one whose host copy an executor released
 * (its dtype, shape and nbytes stand; data is NULL). Readers of constant data treat it
 * as the constant it is and check sizes before they would read. */
static inline bool ot_imp_payload_absent(const ot_value *v) {
    return !v->data && v->init_index >= 0 && v->nbytes > 0;
}

/* Rewrites every node into the one form per op later passes expect (see normalize.c). */
ot_status ot_imp_normalize(ot_graph *g, ot_error *err);

/* After shape inference (or in its place): Reduce axes that folding made constant
 * become the attribute; axes still computed at run time are refused. */
ot_status ot_imp_normalize_late(ot_graph *g, ot_error *err);

/* A new constant value holding a copy of data, named "<node>.<what>" (made unique);
 * its id, or -1 when out of memory (normalize.c). */
int ot_imp_add_const(ot_graph *g, const ot_node *n, const char *what, ot_dtype dt, const ot_shape *s,
                     const void *data, size_t nbytes);

/* sequence.c: SplitToSequence read by SequenceAt at constant positions becomes one
 * Slice per SequenceAt; what cannot be rewritten is noted in m's unsupported list
 * with the reason. The importer defers both ops to this pass while it builds nodes
 * (ot_imp_is_sequence_op). */
bool ot_imp_is_sequence_op(const char *op_type);

/* dropout_pattern.c: the dynamo exporter's lowered Dropout (RandomUniformLike -> Less
 * -> Cast -> Div -> Mul) becomes one Dropout node, so inference turns it off; after
 * shape inference (the pattern's constants and shapes must be known). */
ot_status ot_imp_fuse_dropout(ot_graph *g, ot_error *err);
ot_status ot_imp_rewrite_sequences(ot_graph *g, ot_model *m, ot_error *err);

#endif
