"""export_kv_decoder.py — a tiny HF GPT-2 (use_cache=True) exported with TorchScript
(torch 1.13) the way HF/optimum export decoder_with_past.onnx: inputs input_ids,
attention_mask (over past + sequence), position_ids, past_key_values.N.key/value;
outputs logits, present.N.key/value. Also the same weights exported without a cache
(input_ids only), for comparing gradients. Run with /work/venvs/hf's python:
    export_kv_decoder.py OUTDIR   -> OUTDIR/decoder_with_past.onnx, OUTDIR/decoder.onnx"""
import os
import sys

import torch
import transformers

VOCAB, LAYERS, HEADS, EMBD = 50, 2, 2, 32


class WithPast(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask, position_ids, *past):
        pkv = tuple((past[2 * i], past[2 * i + 1]) for i in range(LAYERS))
        out = self.m(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                     past_key_values=pkv, use_cache=True, return_dict=True)
        flat = [t for kv in out.past_key_values for t in kv]
        return (out.logits, *flat)


class NoPast(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids):
        return self.m(input_ids=input_ids, use_cache=False, return_dict=True).logits


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=VOCAB, n_positions=32, n_embd=EMBD, n_layer=LAYERS, n_head=HEADS,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=True)
    cfg._attn_implementation = "eager"
    m = transformers.GPT2LMHeadModel(cfg).eval()
    B, T, P, D = 2, 4, 3, EMBD // HEADS
    ids = torch.randint(0, VOCAB, (B, T))
    mask = torch.ones(B, P + T, dtype=torch.int64)
    pos = torch.arange(P, P + T).unsqueeze(0).expand(B, T).contiguous()
    past = [torch.randn(B, HEADS, P, D) for _ in range(2 * LAYERS)]
    pnames = [f"past_key_values.{i}.{kv}" for i in range(LAYERS) for kv in ("key", "value")]
    onames = ["logits"] + [f"present.{i}.{kv}" for i in range(LAYERS) for kv in ("key", "value")]
    axes = {"input_ids": {0: "batch_size", 1: "sequence_length"},
            "attention_mask": {0: "batch_size", 1: "total_sequence_length"},
            "position_ids": {0: "batch_size", 1: "sequence_length"},
            "logits": {0: "batch_size", 1: "sequence_length"}}
    for n in pnames:
        axes[n] = {0: "batch_size", 2: "past_sequence_length"}
    for n in onames[1:]:
        axes[n] = {0: "batch_size", 2: "total_sequence_length"}
    torch.onnx.export(WithPast(m), (ids, mask, pos, *past), os.path.join(out, "decoder_with_past.onnx"),
                      input_names=["input_ids", "attention_mask", "position_ids"] + pnames, output_names=onames,
                      dynamic_axes=axes, opset_version=14, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.EVAL)
    torch.onnx.export(NoPast(m), (ids,), os.path.join(out, "decoder.onnx"), input_names=["input_ids"],
                      output_names=["logits"], dynamic_axes={"input_ids": {0: "batch_size", 1: "sequence_length"},
                                                             "logits": {0: "batch_size", 1: "sequence_length"}},
                      opset_version=14, do_constant_folding=False, training=torch.onnx.TrainingMode.EVAL)


if __name__ == "__main__":
    main()
