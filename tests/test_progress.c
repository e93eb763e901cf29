/* test_progress.c — the training progress display (train/progress.c): one line format
 * on a terminal and in a log, with the epoch and one fixed loss precision; the lines a
 * terminal keeps are the log's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/progress.h"

/* What a run of `total` steps over 2 epochs prints, logging every `every` steps. */
static char *run(bool tty, int64_t total, int64_t every, bool force_draw) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ot_progress p;
    ot_progress_init(&p, f, tty, false, total, every);
    for (int64_t s = 1; s <= total; s++) {
        if (force_draw) p.t_last_draw = -1.0; /* as if 0.1 s had passed: no timing in the test */
        ot_progress_step(&p, s, s * 2 > total ? 2 : 1, 2, 1.0 / (double)s, 0.1, 100.0);
    }
    ot_progress_message(&p, "epoch %d", 2);
    ot_progress_finish(&p);
    fclose(f);
    return buf;
}

/* The log: steps 1, every N and the last; epoch, loss with four decimals, no codes. */
static void test_log_lines(void **state) {
    (void)state;
    char *buf = run(false, 10, 5, false);
    assert_non_null(strstr(buf, "epoch 1/2  step 1/10  loss 1.0000  lr 0.1  100.0 samples/s  ETA "));
    assert_non_null(strstr(buf, "epoch 1/2  step 5/10  loss 0.2000  "));
    assert_non_null(strstr(buf, "epoch 2/2  step 10/10  loss 0.1000  "));
    assert_null(strstr(buf, "step 3/10"));
    assert_null(strchr(buf, '\r'));
    assert_non_null(strstr(buf, "\nepoch 2\n"));
    free(buf);
}

/* A terminal redraws the steps between log lines in place, and keeps the log's lines:
 * without the redrawn steps, its text is the log's. */
static void test_terminal_keeps_the_log_lines(void **state) {
    (void)state;
    char *tty = run(true, 10, 5, true), *log = run(false, 10, 5, true);
    assert_non_null(strstr(tty, "step 3/10")); /* drawn in place... */
    assert_non_null(strchr(tty, '\r'));
    /* ...and erased: drop every "\r\033[K"-cleared segment, what is left is the log */
    char *kept = calloc(strlen(tty) + 1, 1);
    size_t k = 0, line = 0;
    for (size_t i = 0; tty[i]; i++) {
        if (!strncmp(tty + i, "\r\033[K", 4)) {
            k = line; /* the partial line is gone */
            i += 3;
            continue;
        }
        kept[k++] = tty[i];
        if (tty[i] == '\n') line = k;
    }
    kept[k] = 0;
    /* ETA is a time: compare up to it on each line */
    for (char *a = kept, *b = log; *a || *b;) {
        char *ea = strstr(a, "ETA"), *eb = strstr(b, "ETA");
        if (!ea || !eb) {
            assert_string_equal(a, b);
            break;
        }
        assert_int_equal(ea - a, eb - b);
        assert_memory_equal(a, b, (size_t)(ea - a));
        a = strchr(ea, '\n') + 1;
        b = strchr(eb, '\n') + 1;
    }
    free(kept);
    free(tty);
    free(log);
}

static void test_loss_precision(void **state) {
    (void)state;
    char b[32];
    assert_string_equal(ot_loss_str(4.3328, b, sizeof b), "4.3328");
    assert_string_equal(ot_loss_str(0.661933, b, sizeof b), "0.6619");
    assert_string_equal(ot_loss_str(4.3, b, sizeof b), "4.3000");
    assert_string_equal(ot_loss_str(0, b, sizeof b), "0.0000");
    assert_string_equal(ot_loss_str(3.14159e-5, b, sizeof b), "3.142e-05");
    assert_string_equal(ot_loss_str(0.0 / 0.0, b, sizeof b), "nan");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_lines),
        cmocka_unit_test(test_terminal_keeps_the_log_lines),
        cmocka_unit_test(test_loss_precision),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
