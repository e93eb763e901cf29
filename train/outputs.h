/* outputs.h — the files one command run reads and writes, checked together before any
 * work.
 *
 * Every command that writes (train -o / --report / --checkpoint-dir, eval
 * --dump-outputs, grad --dump-grads, plan --dot / --timeline) lists its inputs (the
 * model, its external data files, every data file, a checkpoint to resume) and its
 * outputs, then calls ot_run_files_check once: an output that names an input (the same
 * file by (st_dev, st_ino) when both exist, through symlinks and hard links; the same
 * resolved path otherwise), two outputs that name one file, an empty name, a folder
 * where a file is wanted (or the reverse) are OT_E_USAGE naming both options; a
 * destination whose folder is missing or not writable is OT_E_IO. Nothing is created.
 *
 * Writing the outputs only after success is the commands' part, with ot_atomic_open /
 * ot_atomic_finish / ot_atomic_commit (ir/atomic_file.h): all written and synced
 * under temporary names first, then renamed into place.
 */
#ifndef OT_TRAIN_OUTPUTS_H
#define OT_TRAIN_OUTPUTS_H

#include "importer/importer.h"

typedef enum ot_output_kind {
    OT_OUTPUT_FILE,   /* one file (a model, a report, an SVG) */
    OT_OUTPUT_FOLDER, /* a folder created if missing (checkpoints) */
    /* a folder filled with NAME.npy files named after the model's values, and an
     * index.json (--dump-outputs, --dump-grads): an input lying directly in it under
     * such a name could be replaced, so that is refused too */
    OT_OUTPUT_FOLDER_OF_FILES,
} ot_output_kind;

typedef struct ot_run_path {
    char *opt;  /* how messages name it: "-o", "--input", "the model", ... (copied) */
    char *path; /* copied */
    ot_output_kind kind;
} ot_run_path;

typedef struct ot_run_files {
    ot_run_path *in, *out;
    int n_in, n_out, cap_in, cap_out;
} ot_run_files;

/* Adds an input the run reads (path NULL: nothing to add). OT_E_MEMORY only. */
ot_status ot_run_files_input(ot_run_files *f, const char *opt, const char *path, ot_error *err);
/* Adds the model file and every external data file it read (importer/importer.h). */
ot_status ot_run_files_model(ot_run_files *f, const ot_model *m, ot_error *err);
/* Adds an output (path NULL: not written this run). */
ot_status ot_run_files_output(ot_run_files *f, const char *opt, const char *path, ot_output_kind kind,
                              ot_error *err);
/* The checks above, outputs in the order added; the first failure is returned. */
ot_status ot_run_files_check(const ot_run_files *f, ot_error *err);
void ot_run_files_free(ot_run_files *f);

#endif
