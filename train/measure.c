/* measure.c — warmed, interleaved step timings of several remat configurations over
 * one import (see measure.h for the method and why). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "train/measure.h"

#include <math.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "train/rss.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The p-quantile of sorted x[0..n) by linear interpolation (numpy's default). */
static double quantile(const double *x, int n, double p) {
    double at = p * (double)(n - 1);
    int lo = (int)floor(at);
    if (lo >= n - 1) return x[n - 1];
    return x[lo] + (at - (double)lo) * (x[lo + 1] - x[lo]);
}

void ot_stats_of(const double *x, int n, ot_stats *out) {
    out->n = n;
    out->median = out->q1 = out->q3 = out->min = out->max = NAN;
    if (n <= 0) return;
    double *s = malloc((size_t)n * sizeof *s);
    if (!s) return;
    memcpy(s, x, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    out->min = s[0];
    out->max = s[n - 1];
    out->median = quantile(s, n, 0.5);
    out->q1 = quantile(s, n, 0.25);
    out->q3 = quantile(s, n, 0.75);
    free(s);
}

double ot_measure_loadavg(void) {
    FILE *f = fopen("/proc/loadavg", "r");
    double l = NAN;
    if (!f) return NAN;
    if (fscanf(f, "%lf", &l) != 1) l = NAN;
    fclose(f);
    return l;
}

/* Resident bytes of this process now, 0 when unreadable. */
static int64_t rss_now(void) {
    ot_rss r;
    return ot_rss_read(&r) ? r.rss : 0;
}

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cpus_allowed(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void ot_measure_free(ot_measure *mr) {
    for (int i = 0; mr->r && i < mr->n; i++) {
        free(mr->r[i].wall);
        free(mr->r[i].cpu);
        free(mr->r[i].timeline);
    }
    free(mr->r);
    memset(mr, 0, sizeof *mr);
}

/* One timed step of session s: wall and CPU seconds (every thread of the process:
 * OpenMP workers spinning between regions count too). */
static ot_status timed_step(ot_train_session *s, ot_dataset *data, int64_t step, double *wall, double *cpu,
                            double *loss, ot_error *err) {
    double w0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    ot_status st = ot_train_step_once(s, data, step, loss, err);
    *cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    *wall = clock_s(CLOCK_MONOTONIC) - w0;
    return st;
}

/* Builds configuration c's session and runs its warm-up step (step 0). */
static ot_status build_one(ot_model *m, const ot_train_options *base, ot_dataset *data, ot_measure_result *r,
                           ot_train_session **out, ot_error *err) {
    ot_train_options o = *base;
    o.remat = r->cfg.remat;
    o.memory_budget = r->cfg.memory_budget;
    o.keep_host_weights = true; /* the next session starts from the import's weights too */
    o.plan_only = false;
    int64_t rss0 = rss_now();
    ot_status st = ot_train_session_new(m, &o, data, true, out, err);
    if (st) return ot_error_prefix(err, "--remat %s: ", r->cfg.remat);
    ot_train_return_weights(*out); /* the arena holds its copy: the next session borrows them */
    double w, c;
    if ((st = timed_step(*out, data, 0, &w, &c, &r->loss, err)))
        return ot_error_prefix(err, "--remat %s: ", r->cfg.remat);
    r->rss_delta = rss_now() - rss0;
    r->rs = *ot_train_remat_info(*out);
    const ot_plan *p = ot_train_plan(*out);
    r->planned_peak = ot_plan_peak_bytes(p);
    r->planned_peak_step = p->peak_step;
    r->backward_step = p->backward_step;
    r->timeline = malloc((size_t)(p->n_steps > 0 ? p->n_steps : 1) * sizeof *r->timeline);
    if (!r->timeline) return ot_fail(err, OT_E_MEMORY, "out of memory");
    memcpy(r->timeline, p->timeline, (size_t)p->n_steps * sizeof *r->timeline);
    r->n_sched = p->n_steps;
    return OT_OK;
}

ot_status ot_measure_run(ot_model *m, const ot_train_options *base, ot_dataset *data, const ot_measure_config *cfg,
                         int n, int64_t steps, double load_before, ot_measure *out, ot_error *err) {
    memset(out, 0, sizeof *out);
    if (n < 1 || steps < 1 || steps > INT32_MAX)
        return ot_fail(err, OT_E_INTERNAL, "measure: %d configurations, %lld steps", n, (long long)steps);
    ot_status st = OT_OK;
    ot_train_session **s = calloc((size_t)n, sizeof *s);
    double *ratio = malloc((size_t)steps * sizeof *ratio);
    out->r = calloc((size_t)n, sizeof *out->r);
    if (!s || !ratio || !out->r) {
        st = ot_fail(err, OT_E_MEMORY, "out of memory");
        goto fail;
    }
    out->n = n;
    out->steps = steps;
    out->cpus = cpus_allowed();
    out->threads = base->n_threads > 0 ? base->n_threads : omp_get_max_threads();
    out->load_before = isnan(load_before) ? ot_measure_loadavg() : load_before;
    out->busy = !isnan(out->load_before) && out->load_before > (double)(out->cpus - out->threads) + 0.5;
    for (int c = 0; c < n; c++) {
        ot_measure_result *r = &out->r[c];
        r->cfg = cfg[c];
        r->wall = calloc((size_t)steps, sizeof *r->wall);
        r->cpu = calloc((size_t)steps, sizeof *r->cpu);
        if (!r->wall || !r->cpu) {
            st = ot_fail(err, OT_E_MEMORY, "out of memory");
            goto fail;
        }
        if ((st = build_one(m, base, data, r, &s[c], err))) goto fail;
    }
    out->batch = ot_train_batch_size(s[0]);
    for (int64_t k = 0; k < steps; k++) /* round k: every configuration once, in order */
        for (int c = 0; c < n; c++)
            if ((st = timed_step(s[c], data, 1 + k, &out->r[c].wall[k], &out->r[c].cpu[k], &out->r[c].loss, err))) {
                ot_error_prefix(err, "--remat %s: ", cfg[c].remat);
                goto fail;
            }
    for (int c = 0; c < n; c++) {
        ot_measure_result *r = &out->r[c];
        ot_stats_of(r->wall, (int)steps, &r->wall_s);
        ot_stats_of(r->cpu, (int)steps, &r->cpu_s);
        for (int64_t k = 0; k < steps; k++)
            ratio[k] = out->r[0].wall[k] > 0 ? r->wall[k] / out->r[0].wall[k] : NAN;
        ot_stats_of(ratio, (int)steps, &r->ratio);
        r->measured_peak = ot_train_high_water(s[c]);
        r->measured_peak_step = ot_train_high_water_step(s[c]);
    }
    out->load_after = ot_measure_loadavg();
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) out->max_rss = (int64_t)ru.ru_maxrss * 1024;
fail:
    for (int c = 0; s && c < n; c++)
        ot_train_session_free(s[c]);
    free(s);
    free(ratio);
    if (st) ot_measure_free(out);
    return st;
}
