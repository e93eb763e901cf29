/* wait_policy.c — `--wait-policy`: how idle OpenMP workers wait, applied by re-running
 * the program with libgomp's variables set (see wait_policy.h for why). "auto" measures
 * how busy the machine's CPUs are for 100 ms before the start (/proc/stat: our own
 * process sleeps meanwhile, so every busy tick is someone else's) and spins only when
 * the threads asked for fit on CPUs that were idle. */
#define _GNU_SOURCE
#include "cli/wait_policy.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

bool ot_wait_policy_parse(const char *text, ot_wait_policy *out) {
    static const struct { const char *name; ot_wait_policy p; } names[] = {
        {"auto", OT_WAIT_AUTO}, {"spin", OT_WAIT_SPIN}, {"passive", OT_WAIT_PASSIVE}};
    for (size_t i = 0; text && i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(text, names[i].name)) {
            *out = names[i].p;
            return true;
        }
    return false;
}

/* The value of a long option on the command line, as getopt_long reads it: "--NAME V"
 * or "--NAME=V", NAME possibly abbreviated down to `min_len` characters (getopt takes
 * any unambiguous prefix; the callers' tables make it unique from there). Stops at
 * "--". NULL when absent; the last one wins, as in the commands' parsers. */
static const char *option_value(int argc, char **argv, const char *name, size_t min_len) {
    const char *v = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) break;
        if (strncmp(a, "--", 2)) continue;
        a += 2;
        size_t n = strcspn(a, "=");
        if (n < min_len || n > strlen(name) || strncmp(a, name, n)) continue;
        if (a[n] == '=')
            v = a + n + 1;
        else if (i + 1 < argc)
            v = argv[++i];
    }
    return v;
}

/* CPUs' worth of busy time over `ms` milliseconds (user, nice, system, irq, softirq
 * and steal ticks of all CPUs over all ticks, times the CPU count), or -1 when
 * /proc/stat cannot be read. */
static double busy_cpus(int ms) {
    unsigned long long busy[2], total[2];
    for (int k = 0; k < 2; k++) {
        FILE *f = fopen("/proc/stat", "r");
        if (!f) return -1;
        unsigned long long v[8] = {0};
        int got = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                         &v[6], &v[7]);
        fclose(f);
        if (got < 4) return -1;
        busy[k] = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]; /* user nice system irq softirq steal */
        total[k] = busy[k] + v[3] + v[4];                   /* + idle iowait */
        if (k == 0) {
            struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
            while (nanosleep(&ts, &ts) != 0) {
            }
        }
    }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (total[1] <= total[0] || ncpu < 1) return -1;
    return (double)(busy[1] - busy[0]) / (double)(total[1] - total[0]) * (double)ncpu;
}

/* Commands that run no kernel: no worker ever waits, so no measurement. */
static bool runs_no_kernel(int argc, char **argv) {
    if (argc < 2) return true;
    static const char *const none[] = {"plan", "info", "help", "--help", "-h", "--version"};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
        if (!strcmp(argv[1], none[i])) return true;
    return false;
}

void ot_cli_apply_wait_policy(int argc, char **argv) {
    if (getenv(OT_WAIT_APPLIED_ENV) || getenv("ONNXTRAIN_NO_REEXEC")) return;
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) {
        /* the user's environment decides; say so in train's summary, no re-run */
        setenv(OT_WAIT_APPLIED_ENV, "as the environment's OMP_WAIT_POLICY / GOMP_SPINCOUNT say", 1);
        return;
    }
    ot_wait_policy p = OT_WAIT_AUTO;
    const char *text = option_value(argc, argv, "wait-policy", 3);
    /* an invalid value is the command parser's to report (exit 2); run passive meanwhile */
    if (text && !ot_wait_policy_parse(text, &p)) p = OT_WAIT_PASSIVE;
    char why[160];
    snprintf(why, sizeof why, "%s (--wait-policy %s)", p == OT_WAIT_SPIN ? "spin" : "passive", text ? text : "");
    if (p == OT_WAIT_AUTO && runs_no_kernel(argc, argv)) {
        p = OT_WAIT_PASSIVE;
        snprintf(why, sizeof why, "passive (auto: this command runs no kernel)");
    } else if (p == OT_WAIT_AUTO) {
        int ncpu = omp_get_num_procs(); /* the CPUs this process may use */
        int threads = ncpu;
        const char *t = option_value(argc, argv, "threads", 3);
        if (t && atoi(t) > 0) threads = atoi(t);
        double busy = busy_cpus(100);
        /* a quarter CPU of slack: daemons and the shell tick now and then */
        p = busy >= 0 && busy + threads <= ncpu + 0.25 ? OT_WAIT_SPIN : OT_WAIT_PASSIVE;
        if (busy < 0)
            snprintf(why, sizeof why, "passive (auto: /proc/stat unreadable)");
        else
            snprintf(why, sizeof why, "%s (auto: %.2f of %d CPUs busy before the start, %d thread%s)",
                     p == OT_WAIT_SPIN ? "spin" : "passive", busy, ncpu, threads, threads == 1 ? "" : "s");
    }
    if (p == OT_WAIT_SPIN) {
        if (setenv("GOMP_SPINCOUNT", OT_WAIT_SPIN_COUNT, 1) != 0) return;
    } else if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0)
        return;
    if (setenv(OT_WAIT_APPLIED_ENV, why, 1) != 0) return;
    execv("/proc/self/exe", argv);
    /* exec failed (no /proc): carry on with libgomp's default policy, and say nothing */
    unsetenv(OT_WAIT_APPLIED_ENV);
}

void ot_wait_watch_init(ot_wait_watch *w) {
    memset(w, 0, sizeof *w);
    const char *applied = getenv(OT_WAIT_APPLIED_ENV);
    w->active = applied && !strncmp(applied, "spin", 4);
    w->t_prev = -1;
}

void ot_wait_watch_pause(ot_wait_watch *w) {
    w->t_prev = -1;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double ot_wait_watch_step(ot_wait_watch *w, double now) {
    if (!w->active || w->hinted) return 0;
    double prev = w->t_prev;
    w->t_prev = now;
    if (prev < 0) return 0;
    w->window[w->n++] = now - prev;
    if (w->n < OT_WAIT_WATCH_WINDOW) return 0;
    w->n = 0;
    double sorted[OT_WAIT_WATCH_WINDOW];
    memcpy(sorted, w->window, sizeof sorted);
    qsort(sorted, OT_WAIT_WATCH_WINDOW, sizeof sorted[0], cmp_double);
    double median = sorted[OT_WAIT_WATCH_WINDOW / 2];
    if (w->fastest == 0 || median < w->fastest) w->fastest = median;
    if (w->fastest > 0 && median >= 2.5 * w->fastest) {
        w->hinted = true;
        return median / w->fastest;
    }
    return 0;
}
