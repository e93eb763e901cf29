/* auto_measure.c — how auto's searches measure a keep set (ot_remat_search_measure, _try,
 * _fits: rewrite, plan, undo, and the best plan so far), and the memo of what they have
 * measured (ot_remat_memo), so that a rewritten graph measured once is not rewritten
 * and planned again.
 *
 * The memo. The searches come back to the same keep sets all the time — the flips undo
 * a move another stage made, every exchange round re-tries what the round before tried,
 * and the second search under the first plan's peak (ot_remat_auto) starts again from
 * the same seeds, ladders and bisections; and keep sets that differ only in candidates
 * nothing recomputed reads make the same graph. On the sweep's rows some 40% of the
 * measurements were of a keep set measured before (gpt2 at half: 5,825 measurements of
 * 3,385 keep sets), and on tests/fixtures/remat_gpt4 at half one planned graph in eight
 * was another keep set's. A measurement is a function of the rewritten graph alone (the
 * rewrite is undone after each), so the memo answers exactly what the planner would:
 * every search takes the same path, to the same plan. It is keyed by what the rewrite
 * reads of the keep set (memo_key), and each entry keeps its key packed (one bit per
 * value), found by a hash of it, then compared in full: a hash collision never answers
 * for another key. It stops taking entries past OT_REMAT_MEMO_MAX_BYTES (then those
 * keys are measured again, as before).
 *
 * Fit-only measurements. Most of the plans auto measures once it has one that fits do
 * not fit (some 80-95% on the sweep's rows), and most of its stages ask only whether a
 * plan fits (exchanges, shifts, bisections, the bulk repair, flips from a fitting plan).
 * For those the planner stops as soon as the peak must pass the budget
 * (ot_remat_measurement.limit, ot_schedule_plan_limit): the memo then records a lower
 * bound, good for any later fit-only question under a budget below it. */
#include <stdlib.h>
#include <string.h>

#include "remat/auto_search.h"
#include "plan/schedule.h"

typedef ot_remat_search search;

/* Packs key[0..n_values) into words (bit v % 64 of word v / 64) and hashes them; never
 * 0, which marks an empty slot. */
static uint64_t memo_pack(const ot_remat_memo *mm, const bool *key, uint64_t *w) {
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < mm->n_words; i++) {
        uint64_t x = 0;
        int lo = i * 64, hi = lo + 64 < mm->n_values ? lo + 64 : mm->n_values;
        for (int v = lo; v < hi; v++)
            x |= (uint64_t)(key[v] != 0) << (v - lo);
        w[i] = x;
        h = (h ^ x) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h ? h : 1;
}

void ot_remat_memo_init(ot_remat_memo *mm, int n_values) {
    memset(mm, 0, sizeof *mm);
    mm->n_values = n_values;
    mm->n_words = (n_values + 63) / 64;
}

void ot_remat_memo_free(ot_remat_memo *mm) {
    free(mm->slot);
    free(mm->keys);
    free(mm->probe);
    memset(mm, 0, sizeof *mm);
}

/* The slot of hash h and packed key w: its entry, or the empty slot where it goes. */
static int memo_slot(const ot_remat_memo *mm, uint64_t h, const uint64_t *w) {
    size_t nb = sizeof(uint64_t) * (size_t)mm->n_words;
    for (int i = (int)(h & (uint64_t)(mm->cap - 1));; i = (i + 1) & (mm->cap - 1)) {
        const ot_remat_memo_slot *e = &mm->slot[i];
        if (e->hash == 0) return i;
        if (e->hash == h && memcmp(mm->keys + (size_t)e->key * (size_t)mm->n_words, w, nb) == 0) return i;
    }
}

bool ot_remat_memo_find(ot_remat_memo *mm, const bool *key, ot_remat_memo_slot *found) {
    if (mm->n_words == 0) return false;
    if (!mm->probe) mm->probe = malloc(sizeof(uint64_t) * (size_t)mm->n_words);
    if (!mm->probe) return false;
    mm->probe_hash = memo_pack(mm, key, mm->probe);
    if (mm->cap == 0) return false;
    const ot_remat_memo_slot *e = &mm->slot[memo_slot(mm, mm->probe_hash, mm->probe)];
    if (e->hash == 0) return false;
    *found = *e;
    return true;
}

/* Doubles the slots (at least 1,024) and places the entries again. */
static bool memo_grow(ot_remat_memo *mm) {
    int cap = mm->cap ? 2 * mm->cap : 1024;
    ot_remat_memo_slot *old = mm->slot;
    int old_cap = mm->cap;
    mm->slot = calloc((size_t)cap, sizeof *mm->slot);
    if (!mm->slot) {
        mm->slot = old;
        return false;
    }
    mm->cap = cap;
    for (int i = 0; i < old_cap; i++)
        if (old[i].hash) {
            const uint64_t *w = mm->keys + (size_t)old[i].key * (size_t)mm->n_words;
            mm->slot[memo_slot(mm, old[i].hash, w)] = old[i];
        }
    free(old);
    return true;
}

void ot_remat_memo_put(ot_remat_memo *mm, int64_t peak, int64_t n_top, double cost, bool above) {
    size_t nb = sizeof(uint64_t) * (size_t)mm->n_words;
    ot_remat_memo_slot put = {.hash = mm->probe_hash, .peak = peak, .n_top = n_top, .cost = cost, .above = above};
    if (!mm->probe) return;
    if (mm->cap > 0) { /* there already (a bound, measured again): the new figures */
        ot_remat_memo_slot *e = &mm->slot[memo_slot(mm, mm->probe_hash, mm->probe)];
        if (e->hash) {
            put.key = e->key;
            *e = put;
            return;
        }
    }
    if (mm->full) return;
    if ((size_t)(mm->n + 1) * nb > OT_REMAT_MEMO_MAX_BYTES) {
        mm->full = true;
        return;
    }
    if (2 * (mm->n + 1) > mm->cap && !memo_grow(mm)) return;
    if (mm->n == mm->key_cap) {
        int key_cap = mm->key_cap ? 2 * mm->key_cap : 1024;
        uint64_t *keys = realloc(mm->keys, nb * (size_t)key_cap);
        if (!keys) return;
        mm->keys = keys;
        mm->key_cap = key_cap;
    }
    memcpy(mm->keys + (size_t)mm->n * (size_t)mm->n_words, mm->probe, nb);
    put.key = mm->n++;
    mm->slot[memo_slot(mm, mm->probe_hash, mm->probe)] = put;
}

/* What the rewrite of keep reads of it (remat/rewrite.c), into s->memo_key: the values
 * it recomputes, saved ones and those a clone reads (the clones are s->walk_cloned,
 * marked from keep). Two keep sets that differ elsewhere (a candidate nothing recomputed
 * reads, kept or not) make the same rewritten graph: the same clones with the same
 * inputs, the same readers rewired; so the memo is keyed by this. */
static const bool *memo_key(search *s, const bool *keep) {
    const ot_remat_analysis *a = s->a;
    bool *k = s->memo_key;
    for (int v = 0; v < a->n_values; v++)
        k[v] = a->saved[v] && !keep[v];
    for (int id = 0; id < a->n_nodes; id++) {
        if (!s->walk_cloned[id]) continue;
        for (int i = s->walk_start[id]; i < s->walk_start[id + 1]; i++) /* its inputs that are candidates */
            if (!keep[s->walk_in[i]]) k[s->walk_in[i]] = true;
    }
    return k;
}

/* Measures one keep set; records it as best when it fits and is cheaper. fit_only: the
 * caller reads the peak only against the budget, so once a plan fits (every plan seen
 * after it that peaks above the budget peaks above the least peak too: neither the
 * best nor the least-peak plan can change by it) the planner may stop above the budget
 * (ot_remat_measurement.limit): then m_out's peak is only some value above it. */
ot_status ot_remat_search_measure_fit(search *s, const bool *keep, bool fit_only, ot_remat_measurement *m_out,
                                      double *cost_out, ot_error *err) {
    int n_clones = 0;
    double est = ot_remat_search_cost(s, keep, &n_clones); /* marks the clones from the search's copy */
    if (est > s->cost_cap) { /* over the no-budget search's cap: never chosen, so not planned */
        if (m_out) *m_out = (ot_remat_measurement){.peak = INT64_MAX, .n_top = INT64_MAX};
        if (cost_out) *cost_out = est;
        return OT_OK;
    }
    int64_t limit = fit_only && s->have_best && s->budget > 0 ? s->budget : 0;
    ot_remat_measurement m = {.scratch = s->scratch, .fit_target = s->fit_target, .limit = limit};
    double cost = 0.0;
    ot_status st = OT_OK;
    ot_remat_memo_slot e;
    /* measured before, in full or over a limit this caller may take */
    if (ot_remat_memo_find(s->memo, memo_key(s, keep), &e) && (!e.above || (limit > 0 && e.peak > limit))) {
        s->stats->n_reused++;
        m.peak = e.peak;
        m.n_top = e.n_top;
        cost = e.cost;
    } else {
        ot_remat_rewrite rw;
        st = ot_remat_apply_marked(s->g, s->a, keep, s->walk_cloned, n_clones, &s->rw_buf, &rw, err);
        if (st != OT_OK) return st;
        cost = rw.extra_flops;
        /* the rewrite rewired the journal's nodes and appended the clones: the schedule
         * reads those and copies the rest from the search's base (search_init) */
        ot_schedule_base_hint(s->scratch, s->g, rw.rw_node, rw.n_rewired);
        st = s->measure(s->g, s->user, &m, err);
        ot_schedule_base_hint(s->scratch, NULL, NULL, 0);
        ot_remat_undo(s->g, &rw);
        if (st != OT_OK) return st;
        ot_remat_memo_put(s->memo, m.peak, m.n_top, cost, limit > 0 && m.exceeded);
    }
    int64_t peak = m.peak;
    s->stats->n_measured++;
    size_t nb = (size_t)s->a->n_values * sizeof(bool);
    if (s->stats->n_measured == 1 || peak < s->stats->min_peak) {
        s->stats->min_peak = peak;
        if (s->min_keep) memcpy(s->min_keep, keep, nb);
    }
    if (peak <= s->budget && (!s->have_best || cost < s->best_cost || (cost == s->best_cost && peak < s->best_peak))) {
        memcpy(s->best, keep, nb);
        s->best_cost = cost;
        s->best_peak = peak;
        s->have_best = true;
    }
    if (m_out) *m_out = m;
    if (cost_out) *cost_out = cost;
    return OT_OK;
}

ot_status ot_remat_search_measure(search *s, const bool *keep, ot_remat_measurement *m_out, double *cost_out,
                                  ot_error *err) {
    return ot_remat_search_measure_fit(s, keep, false, m_out, cost_out, err);
}

ot_status ot_remat_search_try(search *s, const bool *keep, int64_t *peak_out, double *cost_out, ot_error *err) {
    ot_remat_measurement m = {0};
    ot_status st =
        ot_remat_search_measure_fit(s, keep, !peak_out, &m, cost_out, err); /* no peak asked: whether it fits */
    if (peak_out) *peak_out = m.peak;
    return st;
}

ot_status ot_remat_search_fits(search *s, const bool *keep, bool *fits, ot_error *err) {
    ot_remat_measurement m = {0};
    ot_status st = ot_remat_search_measure_fit(s, keep, true, &m, NULL, err);
    *fits = st == OT_OK && s->budget >= 0 && m.peak <= s->budget;
    return st;
}
