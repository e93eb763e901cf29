/* human_size.c — byte counts for people (human_size.h). */
#include <stdio.h>

#include "human_size.h"

char *ot_human_size(double b, char *buf, size_t n) {
    double a = b < 0 ? -b : b;
    if (a >= (double)(1u << 30))
        snprintf(buf, n, "%.2f GiB", b / (double)(1u << 30));
    else if (a >= (double)(1u << 20))
        snprintf(buf, n, "%.2f MiB", b / (double)(1u << 20));
    else if (a >= 1024.0)
        snprintf(buf, n, "%.1f KiB", b / 1024.0);
    else
        snprintf(buf, n, "%.0f B", b);
    return buf;
}

char *ot_human_count(double v, char *buf, size_t n) {
    static const char *const unit[] = {"", " k", " M", " G", " T", " P", " E"};
    double a = v < 0 ? -v : v;
    int u = 0;
    while (a >= 999.5 && u < 6)
        a /= 1000.0, v /= 1000.0, u++;
    if (u == 0)
        snprintf(buf, n, "%.0f", v);
    else
        snprintf(buf, n, "%.*f%s", a >= 99.95 ? 0 : a >= 9.995 ? 1 : 2, v, unit[u]);
    return buf;
}
