/* progress.c — the training progress display (progress.h). */
#include <math.h>
#include <stdarg.h>
#include <time.h>

#include "train/progress.h"

double ot_now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

char *ot_loss_str(double loss, char *buf, size_t n) {
    double a = fabs(loss);
    if (!isfinite(loss))
        snprintf(buf, n, "%s", isnan(loss) ? "nan" : loss > 0 ? "inf" : "-inf");
    else if (a > 0 && a < 1e-3)
        snprintf(buf, n, "%.3e", loss);
    else
        snprintf(buf, n, "%.4f", loss);
    return buf;
}

void ot_progress_init(ot_progress *p, FILE *f, bool tty, bool quiet, int64_t total, int64_t log_every) {
    p->f = f;
    p->tty = tty;
    p->quiet = quiet;
    p->total = total;
    p->log_every = log_every > 0 ? log_every : (total >= 20 ? total / 20 : 1);
    p->t_start = ot_now_seconds();
    p->t_last_draw = 0;
    p->line_open = false;
}

static void fmt_eta(double s, char *buf, size_t n) {
    if (!(s >= 0) || s > 1e8) {
        snprintf(buf, n, "?");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, n, "%ldh%02ldm", t / 3600, (t / 60) % 60);
    else if (t >= 60)
        snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(buf, n, "%lds", t);
}

void ot_progress_step(ot_progress *p, int64_t step, int64_t epoch, int64_t n_epochs, double loss, double lr,
                      double samples_per_s) {
    if (p->quiet || !p->f) return;
    double now = ot_now_seconds();
    double el = now - p->t_start;
    char eta[32], ls[32];
    fmt_eta(step > 0 ? el / (double)step * (double)(p->total - step) : -1, eta, sizeof eta);
    bool log = step >= p->total || step == 1 || step % p->log_every == 0;
    /* between log lines only a terminal shows the step, redrawn at most ~10 times a second */
    if (!log && (!p->tty || now - p->t_last_draw < 0.1)) return;
    p->t_last_draw = now;
    if (p->line_open) fputs("\r\033[K", p->f);
    fprintf(p->f, "epoch %lld/%lld  step %lld/%lld  loss %s  lr %.3g  %.1f samples/s  ETA %s", (long long)epoch,
            (long long)n_epochs, (long long)step, (long long)p->total, ot_loss_str(loss, ls, sizeof ls), lr,
            samples_per_s, eta);
    if (p->loss_scale > 0) fprintf(p->f, "  scale %g  skipped %lld", p->loss_scale, (long long)p->skipped);
    p->line_open = !log;
    if (log) fputc('\n', p->f);
    fflush(p->f);
}

void ot_progress_message(ot_progress *p, const char *fmt, ...) {
    if (!p->f) return;
    if (p->line_open) {
        fputs("\r\033[K", p->f);
        p->line_open = false;
    }
    va_list ap;
    va_start(ap, fmt);
    vfprintf(p->f, fmt, ap);
    va_end(ap);
    fputc('\n', p->f);
    fflush(p->f);
}

void ot_progress_finish(ot_progress *p) {
    if (p->f && p->line_open) {
        fputc('\n', p->f);
        fflush(p->f);
    }
    p->line_open = false;
}
