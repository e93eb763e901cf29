/* export_tensors.c — writes named float tensors as an ONNX model of initializers only
 * (no nodes, inputs or outputs) with string metadata: the form of onnxtrain's LoRA
 * adapters (`--lora-save adapters.onnx`), readable with onnx.load and
 * onnx.numpy_helper.to_array. Packed in memory (adapters are small) and written
 * atomically. */
#include <stdlib.h>
#include <string.h>

#include "import_internal.h"
#include "ir/atomic_file.h"

static ot_status write_packed(const char *path, const Onnx__ModelProto *mp, ot_error *err) {
    size_t size = onnx__model_proto__get_packed_size(mp);
    if (size > OT_MAX_PROTO_FILE_BYTES) return ot_imp_too_big_for_protobuf(path, err);
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return ot_fail(err, OT_E_MEMORY, "%s: out of memory packing the model", path);
    size_t packed = onnx__model_proto__pack(mp, buf);
    ot_atomic_file *af = NULL;
    ot_status st = packed == size ? ot_atomic_open(path, &af, err)
                                  : ot_fail(err, OT_E_INTERNAL, "%s: protobuf packing gave an unexpected size", path);
    if (!st) {
        fwrite(buf, 1, size, ot_atomic_stream(af)); /* a failed write is reported by the commit */
        st = ot_atomic_commit(af, err);
    }
    free(buf);
    return st;
}

ot_status ot_export_tensors(const char *path, const char *graph_name, const char *const *names,
                            const ot_tensor *const *tensors, int n, const char *const *meta, int n_meta,
                            ot_error *err) {
    Onnx__TensorProto *tp = ot_xcalloc((size_t)n + 1, sizeof *tp);
    Onnx__TensorProto **tpp = ot_xcalloc((size_t)n + 1, sizeof *tpp);
    Onnx__StringStringEntryProto *kv = ot_xcalloc((size_t)n_meta + 1, sizeof *kv);
    Onnx__StringStringEntryProto **kvp = ot_xcalloc((size_t)n_meta + 1, sizeof *kvp);
    int64_t *dims = ot_xcalloc((size_t)n * OT_MAX_RANK + 1, sizeof *dims);
    ot_status st = OT_OK;
    if (!tp || !tpp || !kv || !kvp || !dims) {
        st = ot_fail(err, OT_E_MEMORY, "%s: out of memory", path);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        const ot_tensor *t = tensors[i];
        if (t->dtype != OT_F32) {
            st = ot_fail(err, OT_E_INTERNAL, "%s: tensor '%s' is not float32", path, names[i]);
            goto done;
        }
        onnx__tensor_proto__init(&tp[i]);
        tp[i].name = (char *)names[i];
        tp[i].has_data_type = true;
        tp[i].data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
        tp[i].n_dims = (size_t)t->shape.rank;
        tp[i].dims = &dims[(size_t)i * OT_MAX_RANK];
        for (int k = 0; k < t->shape.rank; k++) tp[i].dims[k] = t->shape.dim[k];
        tp[i].has_raw_data = true;
        tp[i].raw_data.len = t->nbytes;
        tp[i].raw_data.data = t->data;
        tpp[i] = &tp[i];
    }
    for (int i = 0; i < n_meta; i++) {
        onnx__string_string_entry_proto__init(&kv[i]);
        kv[i].key = (char *)meta[2 * i];
        kv[i].value = (char *)meta[2 * i + 1];
        kvp[i] = &kv[i];
    }
    Onnx__GraphProto gp;
    onnx__graph_proto__init(&gp);
    gp.name = (char *)graph_name;
    gp.n_initializer = (size_t)n;
    gp.initializer = tpp;
    Onnx__OperatorSetIdProto op;
    onnx__operator_set_id_proto__init(&op);
    op.domain = "";
    op.has_version = true;
    op.version = 17;
    Onnx__OperatorSetIdProto *opp = &op;
    Onnx__ModelProto mp;
    onnx__model_proto__init(&mp);
    mp.has_ir_version = true;
    mp.ir_version = 8;
    mp.producer_name = "onnxtrain";
    mp.graph = &gp;
    mp.n_opset_import = 1;
    mp.opset_import = &opp;
    mp.n_metadata_props = (size_t)n_meta;
    mp.metadata_props = kvp;
    st = write_packed(path, &mp, err);
done:
    free(tp);
    free(tpp);
    free(kv);
    free(kvp);
    free(dims);
    return st;
}
