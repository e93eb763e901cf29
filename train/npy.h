/* npy.h — reading and writing NumPy `.npy` files (the training data, labels and
 * reference fixtures onnxtrain consumes and produces) as ot_tensor.
 *
 * Supported: format versions 1.0, 2.0 and 3.0; C order; little-endian dtypes
 * float32 (<f4), float64 (<f8), float16 (<f2), int64 (<i8), int32 (<i4), uint8 (|u1),
 * int8 (|i1) and bool (|b1); any rank up to OT_MAX_RANK, 0-d arrays included.
 * bfloat16, which numpy lacks, by convention: a uint16 array (<u2) holds bfloat16 bit
 * patterns (the upper half of each float32's bits: `(a.view(np.uint32) >> 16)` after
 * rounding), and so does a 2-byte void array (<V2, what ml_dtypes' bfloat16 saves as);
 * both read as bfloat16, and bfloat16 tensors are written as <u2. Everything
 * else (Fortran order, big-endian, other dtypes, truncated or oversized data) is refused
 * with a message naming the file, before any large allocation. */
#ifndef OT_NPY_H
#define OT_NPY_H

#include "ir.h"

/* Refuse arrays larger than this (bytes of data): a bad header must not make us
 * allocate an absurd amount; real data sets stay far below. */
#define OT_NPY_MAX_BYTES ((uint64_t)1 << 40)

/* Reads a .npy file into a new tensor (*out, free with ot_tensor_free). */
ot_status ot_npy_read(const char *path, ot_tensor **out, ot_error *err);

/* Same, from bytes in memory; `name` is used in error messages (fuzzing, tests). */
ot_status ot_npy_read_buffer(const void *data, size_t n, const char *name, ot_tensor **out, ot_error *err);

/* Writes t as a .npy file (version 1.0, or 2.0 when the header needs it), to a
 * temporary name in the same folder, fsync'd and renamed over `path` (ot_atomic_open),
 * so a failure never leaves a half-written file. */
ot_status ot_npy_write(const char *path, const ot_tensor *t, ot_error *err);

/* Same with an explicit format version: 1, 2 or 3 (0 = choose as ot_npy_write). */
ot_status ot_npy_write_version(const char *path, const ot_tensor *t, int major, ot_error *err);

/* The .npy header ot_npy_write_version writes for t (major 0: as ot_npy_write), into
 * head (OT_NPY_HEADER_MAX bytes); *len gets its length, a multiple of 64. `path`
 * names the file in errors. For writers that put .npy members elsewhere (.npz). */
#define OT_NPY_HEADER_MAX (12 + 64 + OT_MAX_RANK * 24 + 80)
ot_status ot_npy_header(const ot_tensor *t, int major, const char *path, unsigned char *head, size_t *len,
                        ot_error *err);

#endif
