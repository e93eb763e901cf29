/* test_remat_auto_memo.c — auto's searches measure each keep set once (remat/auto_measure.c):
 * a keep set they come back to is answered from the memo, not rewritten and planned
 * again, and the plan is the one the planner's answers lead to.
 *
 * On the 4-layer GPT fixture (tests/fixtures/remat_gpt4, as test_remat_auto_unclone.c)
 * at half of the way from its least planned peak to its plain one, a measure that
 * fingerprints every graph it is given (each live node's id, op, inputs and outputs)
 * must never see the same rewritten graph twice; before the memo it saw most of them
 * more than once (the second search under the first plan's peak starts from the same
 * seeds). And the memo itself: every keep set put is found with its figures, a keep
 * set one value away is not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/backend.h"
#include "plan/schedule.h"
#include "plan/scratch.h"
#include "remat/auto_search.h"
#include "remat_check.h"

typedef struct seen_graphs {
    uint64_t *fp;
    int64_t *limit; /* the limit it was measured under and passed; 0: measured in full */
    int n, cap, repeats, bounded;
} seen_graphs;

static uint64_t mix(uint64_t h, uint64_t x) {
    h = (h ^ x) * 0xff51afd7ed558ccdull;
    return h ^ (h >> 29);
}

static uint64_t graph_fingerprint(const ot_graph *g) {
    uint64_t h = mix(0x12345, (uint64_t)g->n_values);
    for (int id = 0; id < g->n_nodes; id++) {
        const ot_node *nd = &g->nodes[id];
        if (nd->removed) continue;
        h = mix(mix(h, (uint64_t)id), (uint64_t)nd->op);
        for (int k = 0; k < nd->n_inputs; k++)
            h = mix(h, (uint64_t)(uint32_t)nd->inputs[k]);
        h = mix(h, 0xabcdef);
        for (int k = 0; k < nd->n_outputs; k++)
            h = mix(h, (uint64_t)(uint32_t)nd->outputs[k]);
    }
    return h;
}

/* user: the backend (ot_remat_measure_planner's) and the graphs seen so far. */
typedef struct memo_user {
    void *be;
    seen_graphs seen;
} memo_user;

/* A graph measured again is a repeat unless every earlier measurement of it stopped at
 * a limit lower than this one's (a plan that passed the budget of a fit-only question
 * is measured again when the peak itself is asked, or a higher budget). */
static ot_status measure_once(const ot_graph *g, void *user, ot_remat_measurement *m, ot_error *err) {
    memo_user *u = user;
    uint64_t fp = graph_fingerprint(g);
    ot_status st = ot_remat_measure_planner(g, u->be, m, err);
    int64_t lim = st == OT_OK && m->exceeded ? m->limit : 0;
    bool again = false;
    for (int i = 0; i < u->seen.n && !again; i++)
        again = u->seen.fp[i] == fp && (u->seen.limit[i] == 0 || (m->limit > 0 && u->seen.limit[i] >= m->limit));
    u->seen.repeats += again;
    u->seen.bounded += lim > 0;
    if (u->seen.n == u->seen.cap) {
        u->seen.cap = u->seen.cap ? 2 * u->seen.cap : 256;
        u->seen.fp = realloc(u->seen.fp, sizeof(uint64_t) * (size_t)u->seen.cap);
        u->seen.limit = realloc(u->seen.limit, sizeof(int64_t) * (size_t)u->seen.cap);
        assert_non_null(u->seen.fp);
        assert_non_null(u->seen.limit);
    }
    u->seen.fp[u->seen.n] = fp;
    u->seen.limit[u->seen.n++] = lim;
    return st;
}

static void test_auto_measures_each_keep_set_once(void **state) {
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/remat_gpt4/model.onnx", OT_SOURCE_DIR);
    rc_search rs;
    rc_search_open(&rs, path);
    ot_remat_session *s = rs.s;
    ot_error err = {0};
    int64_t budget = rs.least + (rs.plain - rs.least) / 2;
    memo_user u = {.be = s->be};
    ot_remat_auto_stats as = {0};
    assert_int_equal(ot_remat_auto(s->g, &s->an, budget, measure_once, &u, rs.keep, &as, &err), OT_OK);
    print_message("%lld bytes: %d measurements, %d from the memo, %d planned (%d stopped above the budget), %d "
                  "repeats; plan %.0f FLOPs at %lld\n",
                  (long long)budget, as.n_measured, as.n_reused, u.seen.n, u.seen.bounded, u.seen.repeats, as.cost,
                  (long long)as.peak);
    assert_true(as.peak <= budget);
    assert_int_equal(u.seen.repeats, 0);
    assert_int_equal(u.seen.n, as.n_measured - as.n_reused);
    assert_true(as.n_reused > 0);    /* the second search's seeds at least */
    assert_true(u.seen.bounded > 0); /* exchanges that do not fit, at least */
    /* the same plan as the product's measure gives */
    ot_remat_auto_stats plain = {0};
    bool *keep2 = calloc((size_t)s->an.n_values + 1, sizeof(bool));
    assert_non_null(keep2);
    assert_int_equal(ot_remat_auto(s->g, &s->an, budget, ot_remat_measure_planner, s->be, keep2, &plain, &err), OT_OK);
    assert_memory_equal(keep2, rs.keep, (size_t)s->an.n_values);
    assert_true(plain.cost == as.cost);
    assert_int_equal(plain.peak, as.peak);
    free(keep2);
    free(u.seen.fp);
    free(u.seen.limit);
    rc_search_close(&rs);
}

/* ot_schedule_plan_limit against ot_schedule_plan_scratch on the fixture's graph under
 * the plain, sqrt and every:2 keep sets and the CPU backend's workspace: within the
 * limit the same order and plan; one byte below the peak, and at limits spread down to
 * the pinned bytes (where the two orders' device-free peaks fall on either side of it,
 * or both pass it), exceeded and no plan. */
static void test_limited_schedule_is_the_plan_or_exceeded(void **state) {
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/remat_gpt4/model.onnx", OT_SOURCE_DIR);
    ot_remat_session *s = rc_session_open(path);
    ot_plan_device dev = ot_backend_plan_device(s->be);
    ot_plan_scratch *scr = ot_plan_scratch_new(), *scr2 = ot_plan_scratch_new();
    assert_non_null(scr);
    assert_non_null(scr2);
    bool *keep = calloc((size_t)s->an.n_values + 1, sizeof(bool));
    assert_non_null(keep);
    static const ot_remat_policy pols[] = {
        {.kind = OT_REMAT_NONE}, {.kind = OT_REMAT_SQRT}, {.kind = OT_REMAT_EVERY, .every_k = 2}};
    int n_within = 0, n_over = 0, n_aimed = 0;
    for (size_t k = 0; k < sizeof pols / sizeof pols[0]; k++) {
        ot_error err = {0};
        ot_remat_rewrite rw;
        assert_int_equal(ot_remat_policy_keep(s->g, &s->an, &pols[k], keep, &err), OT_OK);
        assert_int_equal(ot_remat_apply(s->g, &s->an, keep, &rw, &err), OT_OK);
        int *order = NULL, n = 0;
        ot_plan *plan = NULL;
        assert_int_equal(ot_schedule_plan_scratch(s->g, &dev, scr, &order, &n, &plan, &err), OT_OK);
        size_t peak = plan->peak_bytes;
        for (int t = 0; t <= 16; t++) {
            /* the peak, one byte less, then down to the pinned bytes */
            size_t limit = t == 0   ? peak
                           : t == 1 ? peak - 1
                                    : plan->pinned_bytes + (peak - plan->pinned_bytes) * (size_t)(16 - t) / 16;
            int *o2 = NULL, n2 = 0;
            ot_plan *p2 = NULL;
            bool exceeded = true;
            /* aimed at the limit (ot_plan_options.fit_target_bytes, as auto's measure
             * does): the bounded run is over exactly when the unbounded one's peak is */
            ot_plan_options aim = {.fit_target_bytes = limit};
            int *o3 = NULL, n3 = 0;
            ot_plan *p3 = NULL;
            assert_int_equal(ot_schedule_plan_opts(s->g, &dev, &aim, scr, &o3, &n3, &p3, &err), OT_OK);
            size_t aimed_peak = p3->peak_bytes;
            assert_int_equal(ot_schedule_plan_limit(s->g, &dev, &aim, scr2, limit, &o2, &n2, &p2, &exceeded, &err),
                             OT_OK);
            assert_int_equal(exceeded, aimed_peak > limit);
            if (!exceeded) {
                assert_int_equal(p2->peak_bytes, aimed_peak);
                for (int v = 0; v < p3->n_values; v++) assert_int_equal(p2->values[v].offset, p3->values[v].offset);
                n_aimed++;
            }
            assert_int_equal(ot_schedule_plan_scratch(s->g, &dev, scr, &order, &n, &plan, &err), OT_OK);
            assert_int_equal(ot_schedule_plan_limit(s->g, &dev, NULL, scr2, limit, &o2, &n2, &p2, &exceeded, &err),
                             OT_OK);
            assert_int_equal(exceeded, limit < peak);
            assert_int_equal(n2, n);
            if (limit < peak) {
                assert_null(p2);
                n_over++;
                continue;
            }
            n_within++;
            assert_non_null(p2);
            assert_memory_equal(o2, order, sizeof(int) * (size_t)n);
            assert_int_equal(p2->peak_bytes, peak);
            assert_memory_equal(p2->timeline, plan->timeline, sizeof(size_t) * (size_t)n);
            for (int v = 0; v < plan->n_values; v++)
                assert_int_equal(p2->values[v].offset, plan->values[v].offset);
        }
        ot_remat_undo(s->g, &rw);
    }
    assert_int_equal(n_within, 3);
    assert_int_equal(n_over, 3 * 16);
    assert_true(n_aimed >= n_within);
    print_message("limited schedules: %d within, %d over, %d within when aimed at the limit\n", n_within, n_over,
                  n_aimed);
    free(keep);
    ot_plan_scratch_free(scr);
    ot_plan_scratch_free(scr2);
    ot_remat_session_free(s);
}

static void test_memo_finds_what_was_put(void **state) {
    (void)state;
    enum { NV = 150, NSETS = 3000 };
    ot_remat_memo mm;
    ot_remat_memo_init(&mm, NV);
    bool keep[NV];
    ot_remat_memo_slot e;
    uint64_t x = 88172645463325252ull;
    for (int pass = 0; pass < 2; pass++) {
        x = 88172645463325252ull; /* the same keep sets each pass */
        for (int i = 0; i < NSETS; i++) {
            for (int v = 0; v < NV; v++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                keep[v] = (x & 3) == 0;
            }
            keep[i % NV] = true; /* the set one value away (tried below) has it false */
            bool found = ot_remat_memo_find(&mm, keep, &e);
            if (pass == 0) {
                if (!found) ot_remat_memo_put(&mm, 1000 + i, i % 7, 0.5 * i, i % 3 == 0);
                continue;
            }
            assert_true(found); /* 3,000 random sets of 150 values: all distinct */
            assert_int_equal(e.peak, 1000 + i);
            assert_int_equal(e.n_top, i % 7);
            assert_true(e.cost == 0.5 * i);
            assert_int_equal(e.above, i % 3 == 0);
            if (e.above) { /* a bound measured again: replaced, not added */
                ot_remat_memo_put(&mm, 5000 + i, 1, 0.5 * i, false);
                assert_true(ot_remat_memo_find(&mm, keep, &e));
                assert_true(e.peak == 5000 + i && !e.above);
            }
            keep[i % NV] = false; /* one value away: never put */
            assert_false(ot_remat_memo_find(&mm, keep, &e));
        }
    }
    assert_int_equal(mm.n, NSETS);
    ot_remat_memo_free(&mm);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_memo_finds_what_was_put),
                                       cmocka_unit_test(test_limited_schedule_is_the_plan_or_exceeded),
                                       cmocka_unit_test(test_auto_measures_each_keep_set_once)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
