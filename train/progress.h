/* progress.h — what `onnxtrain train` shows while it runs: one line format, the same
 * on a terminal and in a log ("epoch 1/8  step 32/256  loss 4.1234  lr 0.003  5230.1
 * samples/s  ETA 2s"). A log line is written every N steps (and for the first and the
 * last); on a terminal the line of the current step is also redrawn in place between
 * them (at most ~10 times a second), so the lines that stay are the log's. Losses are
 * printed by ot_loss_str everywhere (progress, validation, the final summary, eval).
 * Quiet mode prints nothing but messages. Timing uses the monotonic clock. */
#ifndef OT_PROGRESS_H
#define OT_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct ot_progress {
    FILE *f;
    bool tty;        /* redraw the current step's line in place between log lines */
    bool quiet;
    int64_t total;   /* optimizer steps of the run */
    int64_t log_every;
    double t_start;  /* seconds, monotonic */
    double t_last_draw;
    bool line_open;  /* a partial in-place line is on screen */
    /* fp16 loss scaling: the scale and the steps skipped so far, shown after the rate
     * when loss_scale > 0 (set before ot_progress_step) */
    double loss_scale;
    int64_t skipped;
} ot_progress;

/* Monotonic seconds. */
double ot_now_seconds(void);

/* A loss with one fixed precision: four decimals ("4.3328", "0.6619"), or four
 * significant digits in exponent form below 0.001 ("3.142e-05") where four decimals
 * would read 0. Non-finite values as "nan", "inf". Returns buf (32 bytes is enough). */
char *ot_loss_str(double loss, char *buf, size_t n);

/* tty: pass isatty(fileno(f)) (the CLI decides; tests pass false). log_every 0 = a
 * sensible default (about 20 lines per run). */
void ot_progress_init(ot_progress *p, FILE *f, bool tty, bool quiet, int64_t total, int64_t log_every);
/* After optimizer step `step` (1-based), in epoch `epoch` (1-based) of n_epochs, with
 * its loss, learning rate and the samples it consumed per second so far. */
void ot_progress_step(ot_progress *p, int64_t step, int64_t epoch, int64_t n_epochs, double loss, double lr,
                      double samples_per_s);
/* A full line of text (validation results, warnings): clears the in-place line first. */
void ot_progress_message(ot_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Ends the in-place line. */
void ot_progress_finish(ot_progress *p);

#endif
