/* test_files.h — loading a model or a .npy file in a test, failing the test (with the
 * loader's message) when it cannot be loaded. Paths are printf formats, so a test
 * writes test_npy(SAMPLES "%s/%s", dir, file). */
#ifndef OT_TEST_FILES_H
#define OT_TEST_FILES_H

#include "importer/importer.h"
#include "train/npy.h"

ot_tensor *test_npy(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
ot_model *test_model(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Loads fixture dir/name from its file (from_memory false) or from its bytes in memory
 * (ot_model_load_buffer, external data resolved against dir) and frees the model; the
 * status, with the message in *err. */
ot_status test_load_fixture(const char *dir, const char *name, bool from_memory, ot_error *err);
/* Both ways, the fixture is refused with `code` and a message naming the file and
 * containing n1 and n2 (each may be NULL). */
void test_expect_refused(const char *dir, const char *name, ot_status code, const char *n1, const char *n2);

#endif
