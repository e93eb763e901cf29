/* auto_memo.c — the measurements auto's searches have made, by what each rewrite read of
 * its keep set (auto_search.h, ot_remat_memo; the key is remat/auto.c's memo_key: the
 * values recomputed, saved ones and those a clone reads), so that a rewritten graph
 * measured once is not rewritten and planned again.
 *
 * Why: the searches come back to the same keep sets all the time — the flips undo a
 * move another stage made, every exchange round re-tries what the round before tried,
 * and the second search under the first plan's peak (ot_remat_auto) starts again from the
 * same seeds, ladders and bisections; and keep sets that differ only in candidates
 * nothing recomputed reads make the same graph. On the sweep's rows some 40% of the
 * measurements were of a keep set measured before (gpt2 at half: 5,825 measurements of
 * 3,385 keep sets), and on tests/fixtures/remat_gpt4 at half one planned graph in eight
 * was another keep set's. A measurement is a function of the rewritten graph alone (the
 * rewrite is undone after each), so the memo answers exactly what the planner would:
 * every search takes the same path, to the same plan.
 *
 * Each entry keeps its key packed (one bit per value) and is found by a hash of it,
 * then compared in full: a hash collision never answers for another key. The memo stops
 * taking entries past OT_REMAT_MEMO_MAX_BYTES (then those keys are measured again, as
 * before). */
#include <stdlib.h>
#include <string.h>

#include "remat/auto_search.h"

/* Packs key[0..n_values) into words (bit v % 64 of word v / 64) and hashes them; never
 * 0, which marks an empty slot. */
static uint64_t memo_pack(const ot_remat_memo *mm, const bool *key, uint64_t *w) {
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < mm->n_words; i++) {
        uint64_t x = 0;
        int lo = i * 64, hi = lo + 64 < mm->n_values ? lo + 64 : mm->n_values;
        for (int v = lo; v < hi; v++) x |= (uint64_t)(key[v] != 0) << (v - lo);
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

bool ot_remat_memo_find(ot_remat_memo *mm, const bool *key, int64_t *peak, int64_t *n_top, double *cost) {
    if (mm->n_words == 0) return false;
    if (!mm->probe) mm->probe = malloc(sizeof(uint64_t) * (size_t)mm->n_words);
    if (!mm->probe) return false;
    mm->probe_hash = memo_pack(mm, key, mm->probe);
    if (mm->cap == 0) return false;
    const ot_remat_memo_slot *e = &mm->slot[memo_slot(mm, mm->probe_hash, mm->probe)];
    if (e->hash == 0) return false;
    *peak = e->peak;
    *n_top = e->n_top;
    *cost = e->cost;
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

void ot_remat_memo_put(ot_remat_memo *mm, int64_t peak, int64_t n_top, double cost) {
    size_t nb = sizeof(uint64_t) * (size_t)mm->n_words;
    if (!mm->probe || mm->full) return;
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
    int i = memo_slot(mm, mm->probe_hash, mm->probe);
    if (mm->slot[i].hash) return; /* there already */
    memcpy(mm->keys + (size_t)mm->n * (size_t)mm->n_words, mm->probe, nb);
    mm->slot[i] = (ot_remat_memo_slot){.hash = mm->probe_hash, .key = mm->n, .peak = peak, .n_top = n_top, .cost = cost};
    mm->n++;
}
