/* measure.h — the one measurement of what a remat policy costs in step time and saves
 * in memory, for every command that prints a time comparison (`bench`, `verify`, the
 * bare form).
 *
 * Timing one cold plain step against one warm checkpointed step makes recomputation
 * look faster than none: the first step pays page faults, thread start and cold
 * caches. So, over one import and one data set:
 *   1. one session per configuration (a remat policy, optionally a memory budget),
 *      built as `train` builds it (optimizer nodes included), all alive together;
 *   2. one warm-up step per configuration, untimed;
 *   3. N rounds, each one timed step of every configuration in the order given
 *      (none, p1, p2, none, p1, p2, ...), so that drift of the machine (other work,
 *      frequency, cache state) falls on every configuration alike;
 *   4. per configuration the median and spread of wall and CPU seconds per step, and
 *      the overhead against the baseline (the first configuration, `none`) as the
 *      median of the per-round ratios wall[c][r] / wall[base][r] with their quartiles.
 * Steps are real training steps (ot_train_step_once: the optimizer applies), so the
 * weights of each session move as in a run; every session starts from the import's.
 *
 * The machine's load: the 1-minute load average read before the measurement starts
 * (the caller may read it earlier, before its own work loads the machine), against the
 * CPUs this process may run on. The run is marked busy when the other work already
 * wants more than the CPUs its threads leave free, by half a CPU: load_before >
 * cpus - threads + 0.5 (on 2 CPUs with 2 threads: any load above 0.5). Then the steps
 * share CPUs with other work and the figures are unreliable. */
#ifndef OT_TRAIN_MEASURE_H
#define OT_TRAIN_MEASURE_H

#include "train/train.h"

/* Median, quartiles (linear interpolation between order statistics, as numpy's
 * default percentile) and range of n samples. n 0: every field NaN. */
typedef struct ot_stats {
    int n;
    double median, q1, q3, min, max;
} ot_stats;
void ot_stats_of(const double *x, int n, ot_stats *out);

/* One configuration: a policy ("none", "sqrt", "auto", ...) and its budget (bytes;
 * 0: none, the policy's own choice). */
typedef struct ot_measure_config {
    const char *remat;
    int64_t memory_budget;
} ot_measure_config;

typedef struct ot_measure_result {
    ot_measure_config cfg;
    double *wall, *cpu;     /* per round, seconds (steps entries) */
    ot_stats wall_s, cpu_s; /* of wall[] and cpu[] */
    ot_stats ratio;         /* wall[r] / the baseline's wall[r], per round; the baseline: 1 */
    size_t planned_peak;    /* the training arena the planner predicted */
    size_t measured_peak;   /* the arena's high-water mark after the steps */
    int measured_peak_step; /* the schedule step that first reached it (-1: unknown) */
    /* the plan's bytes in use per schedule step (n_sched entries), its peak step and
     * first backward step: what `bench --timeline` draws beside the measured mark */
    size_t *timeline;
    int n_sched, planned_peak_step, backward_step;
    int64_t rss_delta;      /* process resident bytes added by building and warming this session */
    ot_train_remat_summary rs;
    double loss; /* the last timed step's loss */
} ot_measure_result;

typedef struct ot_measure {
    int n; /* configurations; r[0] is the baseline */
    ot_measure_result *r;
    int64_t steps;                  /* timed rounds */
    int64_t batch;                  /* samples per micro-batch */
    int threads, cpus;              /* kernel threads of the steps; CPUs this process may use */
    double load_before, load_after; /* 1-minute load averages; NaN when unreadable */
    bool busy;                      /* see the header comment */
    int64_t max_rss;                /* the process's peak resident bytes at the end */
} ot_measure;

/* The 1-minute load average (/proc/loadavg), NaN when it cannot be read. */
double ot_measure_loadavg(void);

/* Measures cfg[0..n) (cfg[0] the baseline, normally "none") over m and data with
 * options base (remat and budget replaced per configuration; keep_host_weights is set,
 * so every session starts from the import's weights). steps >= 1 timed rounds.
 * load_before: a load average read earlier, or NaN to read it now. On failure out is
 * freed. */
ot_status ot_measure_run(ot_model *m, const ot_train_options *base, ot_dataset *data, const ot_measure_config *cfg,
                         int n, int64_t steps, double load_before, ot_measure *out, ot_error *err);
void ot_measure_free(ot_measure *mr);

#endif
