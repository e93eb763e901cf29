/* test_files.h — loading a model or a .npy file in a test, failing the test (with the
 * loader's message) when it cannot be loaded. Paths are printf formats, so a test
 * writes test_npy(SAMPLES "%s/%s", dir, file). */
#ifndef OT_TEST_FILES_H
#define OT_TEST_FILES_H

#include "importer/importer.h"
#include "train/npy.h"

ot_tensor *test_npy(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
ot_model *test_model(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
