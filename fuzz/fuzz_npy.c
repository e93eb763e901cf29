/* fuzz_npy.c — libFuzzer harness for the .npy reader (ot_npy_read_buffer): arbitrary
 * bytes must give either a tensor whose byte count matches its dtype and shape, or a
 * status with a message; never a crash, a sanitizer report, a leak or an allocation
 * larger than the input justifies. Built by fuzz/CMakeLists.txt (OT_FUZZ=ON). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "train/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ot_error err = {0};
    ot_tensor *t = NULL;
    ot_status st = ot_npy_read_buffer(data, size, "fuzz.npy", &t, &err);
    if (st == OT_OK) {
        /* The data came from the buffer, so it can never be larger than the buffer. */
        int64_t numel = t ? ot_shape_numel(&t->shape) : -1;
        if (!t || numel < 0 || (uint64_t)numel * ot_dtype_size(t->dtype) != t->nbytes || t->nbytes > size) abort();
        ot_tensor_free(t);
    } else if (t || !err.msg[0]) {
        abort();
    }
    return 0;
}
