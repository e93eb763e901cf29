/* test_lora_peft.c — `train --lora-save DIR/` and `--lora-load DIR/` (train/lora_peft.c):
 * the safetensors file parses (header length, F32 entries of PEFT's names and shapes,
 * data_offsets contiguous and covering the data), adapter_config.json says LORA with
 * the run's r and alpha; training continues from a folder bitwise (2 + 2 steps of
 * plain SGD on one batch equal 4), a session made from a folder saves the same bytes;
 * a dynamo export's names map, its folded head is refused before any step; bad folders
 * or settings are refused with their exit codes. (PEFT itself loading the folder is
 * ctest check_peft, samples/zoo/peft_check.py.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_run.h"
#include "test_files.h"
#include "train/train.h"

#define BIN OT_BINARY_DIR "/onnxtrain"
#define S OT_SOURCE_DIR "/samples/"
#define TMP OT_BINARY_DIR "/test_lora_peft_tmp"
#define OUT TMP "/out.txt"
#define run(...) cli_run(OUT, __VA_ARGS__)
/* one batch of the whole data, in file order, plain SGD: a step depends only on the weights */
#define TRAIN BIN " train " S "tinygpt_nodrop.onnx --input " S "data/tinygpt_tokens.npy --labels " S \
    "data/tinygpt_labels.npy --batch-size 512 --no-shuffle --optimizer sgd"

static int setup(void **state) {
    (void)state;
    return system("rm -rf " TMP " && mkdir -p " TMP) == 0 ? 0 : -1;
}

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)len + 1);
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) len = -1;
    fclose(f);
    if (len < 0) {
        free(b);
        return NULL;
    }
    b[len] = 0;
    *n = (size_t)len;
    return b;
}

static bool same_file(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *x = slurp(a, &na), *y = slurp(b, &nb);
    bool same = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}

static void test_layout(void **state) {
    (void)state;
    assert_int_equal(run(TRAIN " --lr 0.5 --lora 4:8 --steps 2 --lora-save " TMP "/a/"), 0);
    size_t n = 0;
    char *b = slurp(TMP "/a/adapter_model.safetensors", &n);
    assert_non_null(b);
    assert_true(n > 8);
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)(unsigned char)b[i] << (8 * i);
    assert_true(hl % 8 == 0 && hl <= n - 8);
    char *h = strndup(b + 8, hl);
    assert_non_null(strstr(h, "{\"__metadata__\":{\"format\":\"pt\"}"));
    /* GPT-style nn.Linear [out, in]: lora_A [r, in], lora_B [out, r] */
    assert_non_null(strstr(h, "\"base_model.model.blocks.0.attn.qkv.lora_A.weight\":{\"dtype\":\"F32\",\"shape\":[4,32]"));
    assert_non_null(strstr(h, "\"base_model.model.blocks.0.attn.qkv.lora_B.weight\":{\"dtype\":\"F32\",\"shape\":[96,4]"));
    assert_non_null(strstr(h, "\"base_model.model.blocks.1.mlp.2.lora_A.weight\":{\"dtype\":\"F32\",\"shape\":[4,128]"));
    assert_null(strstr(h, "head")); /* the default rule leaves the head out */
    /* 8 weights, A and B each, stored back to back in header order */
    unsigned long long prev = 0, b0, b1;
    int entries = 0;
    for (const char *p = h; (p = strstr(p, "\"data_offsets\":[")); p++, entries++) {
        assert_int_equal(sscanf(p, "\"data_offsets\":[%llu,%llu]", &b0, &b1), 2);
        assert_true(b0 == prev && b1 > b0);
        prev = b1;
    }
    assert_int_equal(entries, 16);
    assert_true(prev == n - 8 - hl);
    free(h);
    free(b);
    char *cfg = slurp(TMP "/a/adapter_config.json", &n);
    assert_non_null(cfg);
    assert_non_null(strstr(cfg, "\"peft_type\": \"LORA\""));
    assert_non_null(strstr(cfg, "\"r\": 4,"));
    assert_non_null(strstr(cfg, "\"lora_alpha\": 8,"));
    assert_non_null(strstr(cfg, "\"fan_in_fan_out\": false"));
    assert_non_null(strstr(cfg, "\"target_modules\": [\"blocks.0.attn.qkv\", \"blocks.0.attn.proj\""));
    free(cfg);
}

static void test_continue_bitwise(void **state) {
    (void)state;
    assert_int_equal(run(TRAIN " --lr 0.5 --lora 4:8 --steps 4 --lora-save " TMP "/full/"), 0);
    assert_int_equal(run(TRAIN " --lr 0.5 --lora 4:8 --steps 2 --lora-save " TMP "/half/"), 0);
    /* r and alpha come from the folder */
    assert_int_equal(run(TRAIN " --lr 0.5 --lora-load " TMP "/half/ --steps 2 --lora-save " TMP "/cont/"), 0);
    assert_true(same_file(TMP "/full/adapter_model.safetensors", TMP "/cont/adapter_model.safetensors"));
    assert_false(same_file(TMP "/half/adapter_model.safetensors", TMP "/cont/adapter_model.safetensors"));
}

/* A session made from a folder, saved before any step, writes the same bytes back. */
static void test_load_save_bitwise(void **state) {
    (void)state;
    assert_int_equal(run(TRAIN " --lr 0.5 --lora 4:8 --steps 2 --lora-save " TMP "/src/"), 0);
    ot_error err = {0};
    ot_model *m = test_model(S "tinygpt_nodrop.onnx");
    ot_dataset d;
    memset(&d, 0, sizeof d);
    ot_tensor *x = test_npy(S "data/tinygpt_tokens.npy"), *y = test_npy(S "data/tinygpt_labels.npy");
    if (ot_dataset_add(&d, "", "tokens.npy", -1, x, &err) || ot_dataset_add(&d, OT_DATA_LABELS, "labels.npy", -1, y, &err))
        fail_msg("%s", err.msg);
    ot_train_options o;
    ot_train_options_default(&o);
    o.batch_size = 8;
    o.steps = 1;
    o.lora.rank = 4;
    o.lora.alpha = 8;
    o.lora_load = TMP "/src/";
    ot_train_session *s = NULL;
    if (ot_train_session_new(m, &o, &d, true, &s, &err) || ot_train_save_adapters(s, TMP "/back/", &err))
        fail_msg("%s", err.msg);
    assert_true(same_file(TMP "/src/adapter_model.safetensors", TMP "/back/adapter_model.safetensors"));
    ot_train_session_free(s);
    ot_dataset_free(&d);
    ot_model_free(m);
}

static void test_refusals(void **state) {
    (void)state;
    assert_int_equal(run(TRAIN " --lora 4:8 --steps 1 --lora-save " TMP "/r/"), 0);
    assert_int_equal(run(TRAIN " --lora-load " TMP "/nowhere/ --steps 1 --lora-save " TMP "/x/"), 3);
    cli_expect_in(OUT, "nowhere/adapter_config.json");
    assert_int_equal(run(TRAIN " --lora 2 --lora-load " TMP "/r/ --steps 1 --lora-save " TMP "/x/"), 2);
    cli_expect_in(OUT, "rank 4 and alpha 8");
    /* adapters of other weights */
    assert_int_equal(run(TRAIN " --lora-load " TMP "/r/ --lora-target 'blocks.0.*' --steps 1 --lora-save " TMP "/x/"), 8);
    cli_expect_in(OUT, "base_model.model.blocks.1.attn.qkv.lora_A.weight");
    /* a truncated file, a header length past the end */
    assert_int_equal(system("cp -r " TMP "/r " TMP "/t && truncate -s 100 " TMP "/t/adapter_model.safetensors"), 0);
    assert_int_equal(run(TRAIN " --lora-load " TMP "/t/ --steps 1 --lora-save " TMP "/x/"), 4);
    cli_expect_in(OUT, "not a safetensors file");
    assert_int_equal(system("printf '\\010\\0\\0\\0\\0\\0\\0\\0{\"a\":[1,' > " TMP "/t/adapter_model.safetensors"), 0);
    assert_int_equal(run(TRAIN " --lora-load " TMP "/t/ --steps 1 --lora-save " TMP "/x/"), 4);
    cli_expect_in(OUT, "not valid JSON");
    assert_int_equal(system("printf '{\"peft_type\": \"PREFIX_TUNING\", \"r\": 4}' > " TMP "/t/adapter_config.json"), 0);
    assert_int_equal(run(TRAIN " --lora-load " TMP "/t/ --steps 1 --lora-save " TMP "/x/"), 6);
    cli_expect_in(OUT, "not 'LORA'");
    assert_int_equal(run(TRAIN " --steps 1 --lora-save " TMP "/x/"), 2); /* no --lora */
    assert_int_equal(run(TRAIN " --lora 4 --steps 1 --lora-save " TMP "/x.txt"), 2);
    cli_expect_in(OUT, "or in '/' for a PEFT folder");
}

/* A dynamo export (tests/fixtures/dynamo): the blocks' weights keep their module paths;
 * the LM head it folded into a constant (val_117) has none and is refused before any
 * step. */
static void test_dynamo_names(void **state) {
    (void)state;
#define DYN OT_SOURCE_DIR "/tests/fixtures/dynamo/"
    if (system("unzip -p " DYN "tiny_gpt2.npz data/input_ids.npy.npy > " TMP "/ids.npy && unzip -p " DYN
               "tiny_gpt2.npz data/labels.npy.npy > " TMP "/labels.npy"))
        skip(); /* no unzip */
#define DTRAIN BIN " train " DYN "tiny_gpt2_nodrop.onnx --input " TMP "/ids.npy --labels " TMP "/labels.npy --steps 2"
    assert_int_equal(run(DTRAIN " --lora 2 --lora-save " TMP "/dyn/"), 0);
    size_t n = 0;
    char *cfg = slurp(TMP "/dyn/adapter_config.json", &n);
    assert_non_null(cfg);
    assert_non_null(strstr(cfg, "\"target_modules\": [\"model.transformer.h.0.attn.c_attn\", "));
    assert_non_null(strstr(cfg, "\"fan_in_fan_out\": true")); /* Conv1D: W stored [in, out] */
    free(cfg);
    assert_int_equal(run(DTRAIN " --lora 2 --lora-target 'val_117,*c_fc*' --lora-save " TMP "/dyn2/"), 6);
    cli_expect_in(OUT, "weight 'val_117' has no module name for PEFT");
    char *txt = cli_slurp(OUT);
    assert_null(strstr(txt, "step 1/2")); /* refused before training */
    free(txt);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_continue_bitwise),
        cmocka_unit_test(test_load_save_bitwise),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_dynamo_names),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
