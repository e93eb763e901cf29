/* npz.h — writing NumPy `.npz` archives (np.savez: a zip of .npy members, stored
 * uncompressed) as onnxtrain writes LoRA adapters (`--lora-save adapters.npz`). */
#ifndef OT_NPZ_H
#define OT_NPZ_H

#include "ir.h"

/* Writes tensors[i] as member names[i] + ".npy" (np.load(path)[names[i]] reads it
 * back), atomically (ot_atomic_open). Archives over 4 GiB (zip64) are refused. */
ot_status ot_npz_write(const char *path, const char *const *names, const ot_tensor *const *tensors, int n,
                       ot_error *err);

#endif
