/* measure_print.h — how the CLI shows a measurement (train/measure.h): the table of
 * `bench`, the one time line of `verify` and the bare form, the busy-machine warning
 * and the JSON object (sizes through ir/human_size.h). One place, so every
 * command says the same thing the same way. */
#ifndef OT_CLI_MEASURE_PRINT_H
#define OT_CLI_MEASURE_PRINT_H

#include <stdio.h>

#include "ir/human_size.h"

#include "train/measure.h"

/* When the machine was busy: one line saying so, the load, and that the times are
 * unreliable (nothing otherwise). indent: printed first. */
void ot_cli_print_busy(FILE *f, const ot_measure *mr, const char *indent);

/* `verify`'s and the bare form's time line: the baseline's and configuration c's
 * median step with their IQR, and the ratio's median and IQR with what it means. */
void ot_cli_print_time_line(FILE *f, const ot_measure *mr, int c, const char *indent);

/* `bench`'s table: one row per configuration (peak planned / arena / RSS growth, wall
 * and CPU ms per step, ratio to none, recompute), and the notes under it. */
void ot_cli_print_measure_table(FILE *f, const ot_measure *mr);

/* The measurement as one JSON object (no newline): method, machine, one entry per
 * configuration with bytes, seconds, every round's wall and CPU time. */
void ot_cli_print_measure_json(FILE *f, const ot_measure *mr);

#endif
