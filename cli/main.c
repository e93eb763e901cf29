/* main.c — the `onnxtrain` command: dispatches to subcommands, or to the bare form
 * (`onnxtrain [OPTIONS] MODEL.onnx`, cli/cmd_bare.c) when the first argument is not one. Argument parsing
 * only; the work is done by the library. Exit codes are ot_status values. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h> /* mallopt */
#endif

#include "cli.h"
#include "cli/wait_policy.h"

static void usage(FILE *f) {
    fputs("usage: onnxtrain [OPTIONS] MODEL.onnx\n"
          "       onnxtrain <command> [options]\n\n"
          "The bare form, `onnxtrain [OPTIONS] MODEL.onnx`, is `train` with defaults: with --input and\n"
          "--labels it trains and writes MODEL.tuned.onnx in the current folder (never over an existing\n"
          "file; -o FILE for another); without data it plans a step, checks on\n"
          "synthetic inputs that the policy's step is bitwise the plain one, and prints the command\n"
          "that trains. It applies when the first argument is not a command but an option, a word\n"
          "ending in .onnx or an existing file; anything else is an unknown command. Details:\n"
          "'onnxtrain MODEL.onnx --help'.\n\n"
          "commands:\n"
          "  info     show a model's opset, inputs, outputs, parameters and op support\n"
          "  eval     run the forward pass over .npy data\n"
          "  grad     one forward and backward pass; dump parameter gradients\n"
          "  train    train a model and write the tuned model back as ONNX\n"
          "  plan     show the memory plan and rematerialization choices (runs nothing)\n"
          "  verify   prove a rematerialized step is bitwise equal to the plain one\n"
          "  report   draw the loss curve of a training report (JSON) as SVG\n"
          "  bench    measure step time and peak memory of remat policies against none\n\n"
          "Run 'onnxtrain <command> --help' for the options of each command. Every command defaults\n"
          "to --remat auto: without --memory-budget the least planned peak within +5% FLOPs, never\n"
          "above --remat none's; with it the cheapest plan that fits.\n"
          "Exit codes: 0 ok, 2 usage, 3 I/O, 4 parse, 5 invalid model, 6 unsupported,\n"
          "7 shape, 8 data, 9 memory, 10 numerics, 11 mismatch, 12 device, 13 peer rank, 70 internal.\n",
          f);
}

/* Edit distance (insertions, deletions, substitutions, adjacent swaps) between two
 * short words, capped at 9: enough to tell a typo of a command name. */
static int edit_distance(const char *a, const char *b) {
    int n = (int)strlen(a), m = (int)strlen(b);
    if (n > 16 || m > 16) return 9;
    int d[17][17];
    for (int i = 0; i <= n; i++)
        d[i][0] = i;
    for (int j = 0; j <= m; j++)
        d[0][j] = j;
    for (int i = 1; i <= n; i++)
        for (int j = 1; j <= m; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m] < 9 ? d[n][m] : 9;
}

/* glibc's threshold for serving a block by mmap starts at 128 KiB and rises to the
 * size of each mmapped block freed, up to 32 MiB. A run frees large blocks early (each
 * weight's host copy once it is in the arena), so afterwards oneDNN's per-call GEMM
 * packing buffers (up to 4.5 MiB each) come from the heap, whose freed pages stay
 * resident: 15 MB more RSS during GPT-2 small's steps, beside a 690 MiB plan. A fixed
 * threshold (which also fixes the trim threshold) returns such blocks to the system at
 * free. Memory placement only: no result changes. Set here, not in the library, which
 * must leave its host program's allocator alone. */
static void fix_malloc_thresholds(void) {
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
}

int main(int argc, char **argv) {
    ot_cli_apply_wait_policy(argc, argv); /* may re-run the program: cli/wait_policy.h */
    fix_malloc_thresholds();
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        puts("onnxtrain 0.1.0");
        return 0;
    }
    for (const ot_cli_command *c = ot_cli_commands; c->name; c++)
        if (!strcmp(c->name, cmd)) return c->run(argc - 1, argv + 1);
    if (ot_cli_is_bare(cmd)) return ot_cmd_bare(argc, argv);
    fprintf(stderr, "onnxtrain: unknown command '%s'", cmd);
    for (const ot_cli_command *c = ot_cli_commands; c->name; c++)
        if (edit_distance(cmd, c->name) <= 2) {
            fprintf(stderr, " (did you mean '%s'?)", c->name);
            break;
        }
    fputc('\n', stderr);
    usage(stderr);
    return 2;
}
