/* metrics.c — loss, accuracy and perplexity over batches (metrics.h). */
#include <math.h>
#include <string.h>

#include "train/metrics.h"

void ot_metrics_init(ot_metrics *m, const ot_loss_options *loss, int class_axis, int label_rank, bool float32_logits) {
    memset(m, 0, sizeof *m);
    bool ce = loss->kind == OT_LOSS_CROSS_ENTROPY && label_rank > 0;
    m->accuracy = ce && float32_logits;
    m->per_token = ce && label_rank >= 2;
    m->class_axis = class_axis;
    m->has_ignore = loss->has_ignore_index;
    m->ignore_index = loss->ignore_index;
}

/* Correct predictions (argmax over the class axis, the first of equal maxima) and
 * counted labels of one batch. */
static void count_correct(ot_metrics *m, const ot_tensor *logits, const int64_t *y) {
    const ot_shape *ls = &logits->shape;
    const float *l = logits->data;
    int64_t C = ls->dim[m->class_axis], outer = 1, inner = 1;
    for (int k = 0; k < m->class_axis; k++)
        outer *= ls->dim[k];
    for (int k = m->class_axis + 1; k < ls->rank; k++)
        inner *= ls->dim[k];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t t = y[o * inner + in];
            if (m->has_ignore && t == m->ignore_index) continue;
            int64_t best = 0;
            for (int64_t c = 1; c < C; c++)
                if (l[(o * C + c) * inner + in] > l[(o * C + best) * inner + in]) best = c;
            m->correct += best == t;
            m->counted++;
        }
}

ot_status ot_metrics_add_batch(ot_metrics *m, ot_backend *be, const void *loss_ptr, bool loss64, int64_t n_samples,
                               const void *logits_ptr, ot_tensor *logits, const int64_t *labels, ot_error *err) {
    double loss;
    ot_status st;
    if (loss64) {
        st = be->copy_out(be, &loss, loss_ptr, sizeof loss, err);
    } else {
        float l32 = 0;
        st = be->copy_out(be, &l32, loss_ptr, sizeof l32, err);
        loss = l32;
    }
    if (st) return st;
    if (m->batches == 0) m->first_batch = n_samples;
    m->loss_sum += loss;
    m->weighted_sum += loss * (double)n_samples;
    m->batches++;
    m->samples += n_samples;
    if (!m->accuracy || !labels || !logits_ptr || !logits) return OT_OK;
    if ((st = be->copy_out(be, logits->data, logits_ptr, logits->nbytes, err))) return st;
    count_correct(m, logits, labels);
    return OT_OK;
}

void ot_metrics_get(const ot_metrics *m, ot_metrics_result *r) {
    /* equal batches: the plain mean (validation's figure, to the bit); a last partial
     * batch weighs by its samples */
    bool equal = m->samples == m->batches * m->first_batch;
    r->loss = m->batches == 0 ? NAN : equal ? m->loss_sum / (double)m->batches : m->weighted_sum / (double)m->samples;
    r->accuracy = m->counted ? (double)m->correct / (double)m->counted : NAN;
    r->perplexity = m->per_token && m->batches ? exp(r->loss) : NAN;
    r->samples = m->samples;
    r->counted = m->counted;
}
