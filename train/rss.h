/* rss.h — this process's resident memory as Linux reports it (/proc/self), so that a
 * training run can state what its steps held besides the planned arena.
 *
 * The whole process's maximum RSS (getrusage, `/usr/bin/time -v`) includes loading the
 * model and writing the tuned one. The steps' own peak is read instead as VmHWM after
 * resetting it before the first step: writing "5" to /proc/self/clear_refs (Linux 4.0
 * and later) sets the high-water mark to the resident bytes of that moment. Elsewhere
 * (another OS, /proc not mounted, a kernel without the reset) the readings are 0 and
 * callers say the figure is unavailable rather than print the process's lifetime peak
 * under the steps' name. */
#ifndef OT_TRAIN_RSS_H
#define OT_TRAIN_RSS_H

#include <stdbool.h>
#include <stdint.h>

/* Readings of /proc/self/status in bytes; a field the kernel does not give is 0. */
typedef struct ot_rss {
    int64_t rss;  /* VmRSS: resident now */
    int64_t hwm;  /* VmHWM: the most resident since start or since the last reset */
    int64_t anon; /* RssAnon: heap, arena, thread stacks, library buffers */
    int64_t file; /* RssFile: mapped files (the binary, shared libraries) */
} ot_rss;

/* Fills *out; false (and *out zeroed) when /proc/self/status cannot be read. */
bool ot_rss_read(ot_rss *out);

/* Resets VmHWM to the current VmRSS; false when the kernel refused or has no such
 * file (the high-water mark then still counts from the process's start). */
bool ot_rss_reset_peak(void);

#endif
