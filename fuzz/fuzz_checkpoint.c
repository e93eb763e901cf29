/* fuzz_checkpoint.c — libFuzzer harness for the checkpoint reader
 * (ot_checkpoint_decode). The input is resealed first (payload length and FNV-1a 64
 * written into the header), as a crafted file would be: otherwise nearly every
 * mutation stops at the checksum and the field checks are never reached. A decoded
 * checkpoint must pass ot_checkpoint_validate and hold tensors whose byte counts match
 * their dtype and shape; a refusal must carry a message; never a crash, a sanitizer
 * report, a leak or an allocation larger than the input justifies. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "train/checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *b = malloc(size ? size : 1);
    if (!b) return 0;
    memcpy(b, data, size);
    if (size >= 32) {
        uint64_t n = size - 32, sum = ot_fnv1a64(OT_FNV_OFFSET, b + 32, n);
        for (int i = 0; i < 8; i++) {
            b[16 + i] = (uint8_t)(n >> (8 * i));
            b[24 + i] = (uint8_t)(sum >> (8 * i));
        }
    }
    ot_error err = {0};
    ot_checkpoint c;
    ot_status st = ot_checkpoint_decode(b, size, "fuzz.otc", &c, &err);
    if (st == OT_OK) {
        if (ot_checkpoint_validate(&c, "fuzz.otc", &err) != OT_OK) abort();
        for (int i = 0; i < c.n_tensors; i++) {
            const ot_ckpt_tensor *t = &c.tensors[i];
            int64_t numel = ot_shape_numel(&t->shape);
            if (numel < 0 || (uint64_t)numel * ot_dtype_size(t->dtype) != t->nbytes || t->nbytes > size) abort();
        }
        ot_checkpoint_free(&c);
    } else if (!err.msg[0] || c.n_tensors) {
        abort();
    }
    free(b);
    return 0;
}
