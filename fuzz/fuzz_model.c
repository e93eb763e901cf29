/* fuzz_model.c — libFuzzer harness for the ONNX model importer: feeds arbitrary bytes
 * to ot_model_load_buffer, once with shape inference (constant folding runs the CPU
 * kernels) and once without, and checks that every failure carries a message. Any
 * crash, sanitizer report, leak or huge allocation is a bug: the importer must refuse
 * bad input with a status, never crash. External data resolves against a scratch
 * folder holding one 64-byte file, data.bin, so the confinement and offset checks are
 * fuzzed too. Built by fuzz/CMakeLists.txt (OT_FUZZ=ON). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>

#include "importer/importer.h"
#include "kernels/kernel.h"

/* Fixed, so forked and repeated runs share one folder instead of leaving many. */
#define EXT_DIR "/tmp/ot_fuzz_model_ext"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    if (mkdir(EXT_DIR, 0755) != 0 && errno != EEXIST) abort();
    FILE *f = fopen(EXT_DIR "/data.bin", "wb");
    if (!f) abort();
    for (int i = 0; i < 64; i++) fputc(i, f);
    fclose(f);
    return 0;
}

static void load_once(const uint8_t *data, size_t size, bool shape_inference) {
    ot_import_options opt = {.fold_eval = ot_cpu_fold_eval};
    opt.no_shape_inference = !shape_inference;
    /* allow_unsupported keeps unknown ops in the graph, so the later passes see more
     * of what random bytes produce; alternate on a bit of the input for both paths. */
    opt.allow_unsupported = size > 0 && (data[size - 1] & 1);
    ot_error err = {0};
    ot_model *m = NULL;
    ot_status st = ot_model_load_buffer(data, size, "fuzz.onnx", EXT_DIR, &opt, &m, &err);
    if (st == OT_OK) {
        if (!m || !m->graph) abort(); /* OK must come with a model */
        ot_model_free(m);
    } else if (m || !err.msg[0]) {
        abort(); /* a failure must leave no model and say why */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    load_once(data, size, false);
    load_once(data, size, true);
    return 0;
}
