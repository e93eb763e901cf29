/* cmd_report.c — `onnxtrain report REPORT.json [-o PICTURE.svg]`: draws the loss curve
 * (with the validation loss and the learning rate) of a report that `train --report`
 * wrote, as `train --report` draws it beside the report (train/report_svg.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "train/outputs.h"
#include "train/report_svg.h"

static void usage(FILE *f) {
    fputs("usage: onnxtrain report REPORT.json [-o PICTURE.svg]\n\n"
          "Draws the training loss of every step, the validation loss after each epoch (when\n"
          "the run had validation data) and the learning rate (right axis) of a JSON report\n"
          "written by `onnxtrain train --report REPORT.json`, as SVG. train writes the same\n"
          "picture beside its report; this draws it again, e.g. for an older report.\n\n"
          "  -o, --output FILE         the picture (default: REPORT.svg beside the report)\n"
          "  -h, --help                this help\n\n"
          "Exit codes: 0 ok, 2 usage, 3 I/O, 4 not a report.\n",
          f);
}

int ot_cmd_report(int argc, char **argv) {
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    ot_error err = {0};
    ot_status st = OT_OK;
    const char *out = NULL, *in = NULL;
    char *dflt = NULL;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "ho:", longopts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        if (c == 'o')
            out = optarg;
        else {
            st = ot_fail(&err, OT_E_USAGE, "unknown or incomplete option '%s'", argv[optind - 1]);
            break;
        }
    }
    if (!st && optind != argc - 1)
        st = ot_fail(&err, OT_E_USAGE, optind >= argc ? "missing REPORT.json" : "one report at a time: '%s' is extra",
                     optind + 1 < argc ? argv[optind + 1] : "");
    if (st) {
        fprintf(stderr, "onnxtrain report: %s\nRun 'onnxtrain report --help' for the options.\n", err.msg);
        return st;
    }
    in = argv[optind];
    if (!out && !(out = dflt = ot_report_svg_path(in))) {
        fprintf(stderr, "onnxtrain report: out of memory\n");
        return OT_E_MEMORY;
    }
    ot_run_files f = {0};
    st = ot_run_files_input(&f, "the report", in, &err);
    if (!st) st = ot_run_files_output(&f, "-o", out, OT_OUTPUT_FILE, &err);
    if (!st) st = ot_run_files_check(&f, &err);
    ot_run_files_free(&f);
    ot_report_curves cv = {0};
    if (!st) st = ot_report_read_curves(in, &cv, &err);
    if (!st) st = ot_report_svg_write(out, &cv, &err);
    if (!st)
        printf("wrote %s (%lld steps%s)\n", out, (long long)cv.n_steps, cv.n_val ? ", validation loss" : "");
    else
        fprintf(stderr, "onnxtrain report: %s\n", err.msg);
    ot_report_curves_free(&cv);
    free(dflt);
    return st;
}
