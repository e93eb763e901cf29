/* progress.h — what `onnxtrain train` shows while it runs: on a terminal one line
 * rewritten in place (step/total, loss, samples/s, ETA); otherwise (a pipe, a log
 * file, CI) plain lines every N steps, so logs stay readable. Quiet mode prints
 * nothing but messages. Timing uses the monotonic clock. */
#ifndef OT_PROGRESS_H
#define OT_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct ot_progress {
    FILE *f;
    bool tty;        /* rewrite one line in place */
    bool quiet;
    int64_t total;   /* optimizer steps of the run */
    int64_t log_every;
    double t_start;  /* seconds, monotonic */
    double t_last_draw;
    bool line_open;  /* a partial in-place line is on screen */
} ot_progress;

/* Monotonic seconds. */
double ot_now_seconds(void);

/* tty: pass isatty(fileno(f)) (the CLI decides; tests pass false). log_every 0 = a
 * sensible default (about 20 lines per run). */
void ot_progress_init(ot_progress *p, FILE *f, bool tty, bool quiet, int64_t total, int64_t log_every);
/* After optimizer step `step` (1-based) with its loss, learning rate and the samples
 * it consumed per second so far. */
void ot_progress_step(ot_progress *p, int64_t step, double loss, double lr, double samples_per_s);
/* A full line of text (validation results, warnings): clears the in-place line first. */
void ot_progress_message(ot_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Ends the in-place line. */
void ot_progress_finish(ot_progress *p);

#endif
