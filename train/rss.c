/* rss.c — resident-memory readings from /proc/self (see rss.h). */
#include <stdio.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h> /* malloc_trim */
#endif

#include "train/rss.h"
#include "train/train_internal.h"

bool ot_rss_read(ot_rss *out) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return false;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        long long kb;
        /* every field is "Name:\t<n> kB" */
        if (sscanf(line, "VmRSS: %lld", &kb) == 1) out->rss = (int64_t)kb * 1024;
        else if (sscanf(line, "VmHWM: %lld", &kb) == 1) out->hwm = (int64_t)kb * 1024;
        else if (sscanf(line, "RssAnon: %lld", &kb) == 1) out->anon = (int64_t)kb * 1024;
        else if (sscanf(line, "RssFile: %lld", &kb) == 1) out->file = (int64_t)kb * 1024;
    }
    fclose(f);
    return out->rss > 0;
}

bool ot_rss_reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return false;
    /* "5" resets the peak only; "1".."4" would clear the referenced/soft-dirty bits */
    bool ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

void ot_train_rss_begin(ot_train_result *r) {
    ot_rss now;
    r->rss_steps_peak = r->rss_file = r->rss_anon = 0;
#ifdef __GLIBC__
    /* Building the session (import, autodiff, remat's measurements, the planner)
     * allocates and frees many small blocks; glibc keeps the freed pages resident,
     * in its main heap and in each thread's arena, until something reuses them. Hand
     * them back before the steps, whose own allocations are few. Placement only:
     * no value changes. */
    malloc_trim(0);
#endif
    r->rss_before_steps = ot_rss_reset_peak() && ot_rss_read(&now) && now.hwm > 0 ? now.rss : 0;
}

void ot_train_rss_end(ot_train_result *r) {
    ot_rss now;
    if (r->rss_before_steps <= 0 || !ot_rss_read(&now) || now.hwm <= 0) {
        r->rss_steps_peak = r->rss_before_steps = r->rss_file = r->rss_anon = 0;
        return;
    }
    r->rss_steps_peak = now.hwm;
    r->rss_file = now.file;
    r->rss_anon = now.anon;
}
