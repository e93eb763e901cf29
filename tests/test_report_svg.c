/* test_report_svg.c — the loss curve beside a training report (train/report_svg.c):
 * round ticks on both axes, the legend inside the canvas, the title without folders,
 * a report read back draws the same picture; `train --report` writes it and
 * `onnxtrain report` draws it again, refusing what is not a report. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_run.h"
#include "train/report_svg.h"

#define BIN OT_BINARY_DIR "/onnxtrain"
#define S OT_SOURCE_DIR "/samples/"
#define TMP OT_BINARY_DIR "/test_report_svg_tmp"
#define OUT TMP "/out.txt"
#define run(...) cli_run(OUT, __VA_ARGS__)

static int setup(void **state) {
    (void)state;
    return system("rm -rf " TMP " && mkdir -p " TMP) == 0 ? 0 : -1;
}

static char *draw(const ot_report_curves *c) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ot_report_svg(f, c);
    fclose(f);
    return buf;
}

/* Whether v is k x {1, 2, 5} x 10^e: a round tick. */
static bool round_number(double v) {
    if (v == 0) return true;
    double a = fabs(v), mag = pow(10.0, floor(log10(a) + 1e-9)), f = a / mag;
    double k = round(f);
    return fabs(f - k) < 1e-6 || fabs(f * 2 - round(f * 2)) < 1e-6; /* 1.5 x 10^e as a multiple of 0.5 */
}

static void test_ticks_legend_title(void **state) {
    (void)state;
    double loss[37], lr[37];
    for (int i = 0; i < 37; i++)
        loss[i] = 4.37 - 0.093 * i, lr[i] = 3e-3 * (1.0 - i / 40.0);
    int64_t vs[2] = {18, 37};
    double vl[2] = {2.9, 1.1};
    ot_report_curves c = {.title = "/home/someone/models/tiny&gpt.onnx",
                          .loss = loss,
                          .lr = lr,
                          .n_steps = 37,
                          .val_step = vs,
                          .val_loss = vl,
                          .n_val = 2};
    char *svg = draw(&c);
    assert_non_null(strstr(svg, "training loss: tiny&amp;gpt.onnx"));
    assert_null(strstr(svg, "/home/someone"));
    /* every tick label is a round number; x has 0 and reaches the last step */
    int n_ticks = 0;
    bool x_zero = false, x_end = false;
    for (const char *p = svg; (p = strstr(p, "text-anchor=\"")); p++) {
        const char *gt = strchr(p, '>');
        char *end;
        double v = strtod(gt + 1, &end);
        if (end == gt + 1 || *end != '<') continue;
        assert_true(round_number(v));
        if (!strncmp(p, "text-anchor=\"middle\"", 20)) {
            x_zero |= v == 0;
            x_end |= v >= 37;
        }
        n_ticks++;
    }
    assert_true(n_ticks >= 8);
    assert_true(x_zero && x_end);
    /* the legend box lies inside the canvas */
    const char *box = NULL;
    for (const char *p = svg; (p = strstr(p, "<rect x=")); p++) {
        const char *gt = strchr(p, '>'), *op = strstr(p, "fill-opacity");
        if (op && op < gt) box = p;
    }
    assert_non_null(box);
    int x, y, w, h;
    assert_int_equal(sscanf(box, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"", &x, &y, &w, &h), 4);
    assert_true(x > 0 && y > 0 && x + w < 800 && y + h < 440);
    assert_non_null(strstr(svg, "validation loss"));
    assert_non_null(strstr(svg, "learning rate"));
    free(svg);
}

/* train --report writes r.json and r.svg; `report` draws the same from r.json. */
static void test_train_and_report_command(void **state) {
    (void)state;
    assert_int_equal(run(BIN " train " S "mlp.onnx --input " S "mlp/input.npy --labels " S "mlp/labels.npy"
                             " --val-input " S "mlp/input.npy --val-labels " S
                             "mlp/labels.npy --batch-size 2 --epochs 3"
                             " --threads 2 --report " TMP "/r.json -o " TMP "/t.onnx"),
                     0);
    cli_expect_in(OUT, "r.svg");
    cli_expect_in(TMP "/r.svg", "<svg");
    cli_expect_in(TMP "/r.svg", "validation loss");
    assert_int_equal(run(BIN " report " TMP "/r.json -o " TMP "/again.svg"), 0);
    char *a = cli_slurp(TMP "/r.svg"), *b = cli_slurp(TMP "/again.svg");
    assert_non_null(a);
    assert_non_null(b);
    assert_string_equal(a, b);
    free(a);
    free(b);
    assert_int_equal(run(BIN " report " TMP "/r.json"), 0); /* default: beside it */
    cli_expect_in(OUT, "wrote " TMP "/r.svg");
    /* not a report, no report, the report as its own output */
    assert_int_equal(run(BIN " report " TMP "/out.txt -o " TMP "/x.svg"), 4);
    cli_expect_in(OUT, "not a report");
    assert_int_equal(run(BIN " report " TMP "/missing.json"), 3);
    assert_int_equal(run(BIN " report"), 2);
    assert_int_equal(run(BIN " report " TMP "/r.json -o " TMP "/r.json"), 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ticks_legend_title),
        cmocka_unit_test(test_train_and_report_command),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
