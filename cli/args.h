/* args.h — option-value parsing shared by the CLI commands: integers and reals with
 * range checks, sizes such as "512M", NAME=FILE input specs, and a growable list for
 * repeated options. Every error is OT_E_USAGE naming the option and the text. */
#ifndef OT_CLI_ARGS_H
#define OT_CLI_ARGS_H

#include <stdint.h>

#include "ir.h"

/* A decimal integer in [min, max] ("--steps 100"). */
ot_status ot_args_int(const char *opt, const char *text, int64_t min, int64_t max, int64_t *out, ot_error *err);
/* A finite real ("--lr 3e-4"); min_exclusive: value must be > min, else >= min. */
ot_status ot_args_double(const char *opt, const char *text, double min, bool min_exclusive, double *out,
                         ot_error *err);
/* A byte size: "4096", "512K", "512M", "2G", "1.5GiB", "1T" (K/M/G/T and KiB/... are
 * powers of 1024; a trailing "B" is allowed). */
ot_status ot_args_size(const char *opt, const char *text, int64_t *bytes, ot_error *err);

/* "--input NAME=FILE" or "--input FILE" (name NULL: matched to the model's data
 * inputs in order). A text whose part before '=' contains '/' is a plain FILE. */
typedef struct ot_input_spec {
    char *name; /* malloc'd, or NULL */
    char *path; /* malloc'd */
} ot_input_spec;

typedef struct ot_input_specs {
    ot_input_spec *v;
    int n, cap;
} ot_input_specs;

ot_status ot_args_add_input(ot_input_specs *l, const char *opt, const char *text, ot_error *err);
void ot_input_specs_free(ot_input_specs *l);

/* A list of strings (repeated --freeze / --train / --bind). Items are not copied:
 * they point into argv. */
typedef struct ot_str_list {
    const char **v;
    int n, cap;
} ot_str_list;

ot_status ot_str_list_add(ot_str_list *l, const char *s, ot_error *err);
void ot_str_list_free(ot_str_list *l);

/* Reads every input spec and the labels file (may be NULL) as .npy into d: inputs
 * named as given ("" for positional ones), labels as OT_DATA_LABELS (runtime/train.h).
 * Errors name the file. */
struct ot_dataset;
ot_status ot_args_load_dataset(const ot_input_specs *inputs, const char *labels, struct ot_dataset *d,
                               ot_error *err);

#endif
