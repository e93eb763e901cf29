/* human_size.h — the one way onnxtrain writes a byte count for people: B, KiB, MiB or
 * GiB (powers of 1024) on the terminal, where `--json` writes the exact bytes. Every
 * command's sizes go through it, so the same size reads the same everywhere. Large
 * counts (FLOPs) likewise, in powers of 1000. */
#ifndef OT_HUMAN_SIZE_H
#define OT_HUMAN_SIZE_H

#include <stddef.h>

/* Room for any size up to 9e18 bytes (the most a size option takes), NUL included;
 * a longer text is cut, never overrun. */
#define OT_HUMAN_SIZE_LEN 32

/* Writes b into buf (n bytes, OT_HUMAN_SIZE_LEN is enough): "512 B", "3.5 KiB",
 * "2.03 MiB", "1.25 GiB" (one decimal below a MiB, two from there); negative
 * differences keep their sign. Returns buf, so it can be an argument of printf. */
char *ot_human_size(double b, char *buf, size_t n);

/* A large count (FLOPs) for people, in powers of 1000: "950", "1.46 M", "38.3 M",
 * "2.10 G" (three significant digits from a thousand up). Returns buf. */
char *ot_human_count(double v, char *buf, size_t n);

#endif
