/* train_tinygpt.c — the public C API (onnxtrain.h) in a training loop of the
 * application's own: loads samples/tinygpt.onnx, trains it a few Adam steps on the
 * token and label arrays of samples/data (16 sequences per step, in file order),
 * prints each step's loss and the plan's peak, writes a checkpoint and the tuned model.
 *
 *   train_tinygpt MODEL.onnx TOKENS.npy LABELS.npy OUT.onnx [STEPS]
 *
 * The same run from the command line gives bitwise the same losses and model:
 *   onnxtrain train MODEL.onnx --input TOKENS.npy --labels LABELS.npy --optimizer adam
 *     --lr 0.003 --batch-size 16 --seed 1 --no-shuffle --steps STEPS -o OUT.onnx
 * Exit status: 0, or the onnxtrain_status of the call that failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <onnxtrain.h>

/* A little-endian int64 .npy file, C order (what samples/data holds): its shape and
 * data, or NULL with a message. */
static int64_t *read_npy_i64(const char *path, int *rank, int64_t shape[8]) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open\n", path);
        return NULL;
    }
    unsigned char pre[10];
    char header[4096];
    int64_t *data = NULL;
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) || pre[6] != 1) goto bad;
    size_t hl = (size_t)pre[8] | (size_t)pre[9] << 8;
    if (hl >= sizeof header || fread(header, 1, hl, f) != hl) goto bad;
    header[hl] = 0;
    if (!strstr(header, "'<i8'") || strstr(header, "'fortran_order': True")) goto bad;
    const char *p = strchr(strstr(header, "'shape'"), '(');
    int64_t n = 1;
    *rank = 0;
    while (p && *rank < 8) {
        char *end;
        long long d = strtoll(p + 1, &end, 10);
        if (end == p + 1) break;
        shape[(*rank)++] = d;
        n *= d;
        p = strchr(end, ',');
    }
    if (*rank < 1 || !(data = malloc((size_t)n * sizeof *data)) || fread(data, sizeof *data, (size_t)n, f) != (size_t)n)
        goto bad;
    fclose(f);
    return data;
bad:
    fprintf(stderr, "%s: not an int64 C-order .npy file this sample reads\n", path);
    free(data);
    fclose(f);
    return NULL;
}

static int fail(const char *what) {
    fprintf(stderr, "train_tinygpt: %s: %s\n", what, onnxtrain_last_error());
    return (int)onnxtrain_last_status();
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODEL.onnx TOKENS.npy LABELS.npy OUT.onnx [STEPS]\n", argv[0]);
        return 2;
    }
    int steps = argc > 5 ? atoi(argv[5]) : 8, rank_x, rank_y;
    int64_t sx[8] = {0}, sy[8] = {0};
    int64_t *tokens = read_npy_i64(argv[2], &rank_x, sx), *labels = read_npy_i64(argv[3], &rank_y, sy);
    onnxtrain_options o;
    onnxtrain_options_init(&o);
    o.optimizer = "adam";
    o.lr = 0.003;
    o.seed = 1;
    onnxtrain_session *s = NULL;
    int rc = !tokens || !labels ? 3 : 0;
    if (!rc && onnxtrain_session_open(argv[1], &o, &s)) rc = fail("open");

    const int64_t batch = 16, per_sample = sx[1]; /* tokens and labels: [N, 16] */
    int64_t shape[2] = {batch, per_sample};
    for (int step = 0; step < steps && !rc; step++) {
        int64_t first = (step * batch) % (sx[0] - sx[0] % batch); /* file order, wrapping as an epoch does */
        onnxtrain_tensor x = {"tokens", ONNXTRAIN_INT64, 2, shape, tokens + first * per_sample,
                              (size_t)(batch * per_sample) * sizeof(int64_t)};
        onnxtrain_tensor y = {NULL, ONNXTRAIN_INT64, 2, shape, labels + first * per_sample,
                              (size_t)(batch * per_sample) * sizeof(int64_t)};
        double loss;
        if (onnxtrain_train_step(s, &x, 1, &y, &loss)) rc = fail("train step");
        else printf("step %d loss %.9g\n", step + 1, loss);
    }
    onnxtrain_plan_report r;
    onnxtrain_plan_report_init(&r);
    if (!rc && onnxtrain_plan(s, &r)) rc = fail("plan");
    if (!rc) printf("planned peak %llu bytes (params %llu, kept activations %llu)\n", (unsigned long long)r.peak_bytes,
                    (unsigned long long)r.at_peak[0], (unsigned long long)r.at_peak[6]);
    if (!rc && onnxtrain_save_model(s, argv[4], 0)) rc = fail("save");
    if (!rc) printf("wrote %s after %lld steps\n", argv[4], (long long)onnxtrain_step_count(s));
    onnxtrain_session_free(s); /* NULL after a failed open: nothing */
    free(tokens);
    free(labels);
    return rc;
}
