/* import_internal.h — declarations shared by the importer's own files (load, tensor,
 * external data, attribute checks, normalisation, export). Only importer/ includes
 * this header: it exposes the protobuf-c types that the rest of onnxtrain never sees. */
#ifndef OT_IMPORT_INTERNAL_H
#define OT_IMPORT_INTERNAL_H

#include "importer.h"
#include "onnx.pb-c.h"

/* Tensors above this many bytes are refused before anything is allocated: far more
 * than any model onnxtrain can train, and small enough that a corrupt dim cannot make
 * us ask the allocator for exabytes. */
#define OT_MAX_TENSOR_BYTES (((uint64_t)1) << 34)

/* Reads a whole file into a malloc'd buffer (NUL-terminated for convenience).
 * Missing/unreadable: OT_E_IO naming the path. */
ot_status ot_imp_read_file(const char *path, uint8_t **data, size_t *size, ot_error *err);

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

/* Appends one AttributeProto to n as an ot_attr; *nested is set for graph, sparse and
 * type attributes (the node is then reported as unsupported). */
ot_status ot_imp_convert_attr(const char *file, const char *dir, ot_node *n, const Onnx__AttributeProto *ap,
                              bool *nested, ot_error *err);
/* Adds `node` under `op_type` (and reason) to the model's unsupported list. */
ot_status ot_imp_note_unsupported(ot_model *m, const char *op_type, const char *node, int reason, ot_error *err);

/* Checks the types of the attributes onnxtrain reads, for supported ops. */
ot_status ot_imp_check_attrs(const ot_graph *g, const ot_node *n, ot_error *err);

/* Rewrites every node into the one form per op later passes expect (see normalize.c). */
ot_status ot_imp_normalize(ot_graph *g, ot_error *err);

#endif
