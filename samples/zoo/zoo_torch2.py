"""zoo_torch2.py — the zoo's families that only a current PyTorch (2.x) exports (issue 26):
diffusers' UNet2DModel, HF Wav2Vec2, CLIP and Whisper (encoder and decoder), nn.LSTM and
nn.GRU language models, torchvision's LRASPP, DeepLabV3 and FCN segmentation, and GPT-2, BERT and LLaMA at opset 23 with PyTorch's
scaled_dot_product_attention (the opset-23 exporter writes it as one Attention node and
LLaMA's RMSNorm as RMSNormalization).

Same contract as zoo_models.py: each entry builds a random-weight instance of the real
architecture (the library's own classes and config) with the widths and depths cut so
the file stays a few hundred KB, and says what data it takes. The LSTM / GRU models use
only torch.nn, so zoo_models.py lists them too (PyTorch 1.13's TorchScript exporter).
export_torch2.py exports these with torch.onnx.export(dynamo=True) into committed
fixtures (tests/fixtures/zoo2/).
"""
import torch
import torch.nn as nn

import zoo_models
from zoo_models import BATCH, SEQ, VOCAB, _entry  # noqa: F401 (BATCH: the fixtures' batch)


def _cfg(cfg_name, attn, **cfg):
    import transformers  # noqa: PLC0415
    config = getattr(transformers, cfg_name)(**cfg)
    config._attn_implementation = attn
    return config


# ---- diffusers UNet2DModel: MSE on the noise -----------------------------------------

class UNetNoise(nn.Module):
    """UNet2DModel(sample, timestep).sample: the predicted noise. Two resolutions, one
    attention block, GroupNorm of 2 groups (the opset-18 exporter writes GroupNorm as
    InstanceNormalization over reshaped groups), nearest upsampling."""

    def __init__(self, p):
        super().__init__()
        from diffusers import UNet2DModel  # noqa: PLC0415
        self.unet = UNet2DModel(sample_size=8, in_channels=3, out_channels=3, layers_per_block=1,
                                block_out_channels=(4, 8), down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                                up_block_types=("AttnUpBlock2D", "UpBlock2D"), norm_num_groups=2,
                                attention_head_dim=4, dropout=p)

    def forward(self, sample, timestep):
        return self.unet(sample, timestep).sample


# ---- HF audio / multimodal -----------------------------------------------------------

def wav2vec2(p):
    """Wav2Vec2ForSequenceClassification: GroupNorm feature encoder (conv_bias off, as
    the base model), a weight-normed convolutional position embedding, 2 layers."""
    import transformers  # noqa: PLC0415
    cfg = _cfg("Wav2Vec2Config", "eager", vocab_size=VOCAB, hidden_size=16, num_hidden_layers=2,
               num_attention_heads=2, intermediate_size=32, conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3),
               num_conv_pos_embeddings=4, num_conv_pos_embedding_groups=2, feat_extract_norm="group",
               classifier_proj_size=8, num_labels=4, hidden_dropout=p, attention_dropout=p, activation_dropout=p,
               feat_proj_dropout=p, final_dropout=p, layerdrop=0.0, mask_time_prob=0.0, apply_spec_augment=False)
    return transformers.Wav2Vec2ForSequenceClassification(cfg)


class ClipLogits(nn.Module):
    """CLIPModel: logits_per_image [images, texts], the contrastive loss's image side
    (label i: text i). The text tower pools at the end-of-text token by ArgMax."""

    def __init__(self, p):
        super().__init__()
        import transformers  # noqa: PLC0415
        text = dict(vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                    num_attention_heads=2, max_position_embeddings=SEQ, attention_dropout=p, eos_token_id=2)
        vision = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                      image_size=16, patch_size=8, attention_dropout=p)
        cfg = transformers.CLIPConfig(text_config=text, vision_config=vision, projection_dim=8)
        cfg._attn_implementation = "eager"
        cfg.text_config._attn_implementation = "eager"
        cfg.vision_config._attn_implementation = "eager"
        self.clip = transformers.CLIPModel(cfg)

    def forward(self, input_ids, pixel_values):
        return self.clip(input_ids=input_ids, pixel_values=pixel_values).logits_per_image


class WhisperDecoder(nn.Module):
    """WhisperForConditionalGeneration(input_features, decoder_input_ids).logits: the
    encoder (two Conv1d, GELU) and the decoder (causal self-attention, cross-attention,
    the output projection tied to the token embedding)."""

    def __init__(self, p):
        super().__init__()
        import transformers  # noqa: PLC0415
        cfg = _cfg("WhisperConfig", "eager", vocab_size=VOCAB, num_mel_bins=8, encoder_layers=1,
                   encoder_attention_heads=2, decoder_layers=1, decoder_attention_heads=2, d_model=16,
                   encoder_ffn_dim=32, decoder_ffn_dim=32, max_source_positions=16, max_target_positions=16,
                   dropout=p, attention_dropout=p, activation_dropout=p, pad_token_id=1, bos_token_id=0,
                   eos_token_id=1, decoder_start_token_id=0)
        self.whisper = transformers.WhisperForConditionalGeneration(cfg)

    def forward(self, input_features, decoder_input_ids):
        return self.whisper(input_features=input_features, decoder_input_ids=decoder_input_ids).logits


# ---- opset 23: fused Attention and RMSNormalization ----------------------------------
# No dropout inside attention: ONNX's Attention has none, so torch 2.15 decomposes an
# SDPA call with dropout_p > 0 into MatMul, Add, Softmax, Dropout, and its Add adds the
# boolean mask to the float scores (invalid ONNX: onnxtrain refuses it, "input dtypes
# differ"). Residual and embedding Dropout stay, so `verify` still sees Dropout.

def gpt2_sdpa(p):
    import transformers  # noqa: PLC0415
    return transformers.GPT2LMHeadModel(_cfg("GPT2Config", "sdpa", vocab_size=VOCAB, n_positions=32, n_embd=16,
                                             n_layer=1, n_head=2, resid_pdrop=p, embd_pdrop=p, attn_pdrop=0.0))


def llama_sdpa(p):
    import transformers  # noqa: PLC0415
    return transformers.LlamaForCausalLM(_cfg("LlamaConfig", "sdpa", vocab_size=VOCAB, hidden_size=16,
                                              intermediate_size=32, num_hidden_layers=1, num_attention_heads=4,
                                              num_key_value_heads=2, max_position_embeddings=32,
                                              attention_dropout=0.0))


def bert_sdpa(p):
    import transformers  # noqa: PLC0415
    return transformers.BertForMaskedLM(_cfg("BertConfig", "sdpa", vocab_size=VOCAB, hidden_size=16,
                                             num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                                             max_position_embeddings=32, hidden_dropout_prob=p,
                                             attention_probs_dropout_prob=0.0))


# ---- torchvision segmentation ------------------------------------------------------
# zoo_models.py's TorchScript rows (lraspp, deeplabv3, fcn) at 64x64 hold 100k-300k
# parameters; committed fixtures must stay a few hundred KB, so these build the same
# torchvision classes (LRASPP, DeepLabV3 with ASPP, FCN with FCNHead over a dilated
# Bottleneck ResNet) on narrower backbones and a 32x32 image. The backbones' output
# stride is 16 (MobileNetV3, dilated last stage) or 8 (the ResNet), so the bilinear
# Resizes still enlarge a 2x2 or 4x4 map.
SEG_IMAGE = 32


def _mobilenet_stages(low_stage):
    """MobileNetV3-Small (width 0.1, dilated) features as {"low", "high"} or {"out"}
    (torchvision's _lraspp_mobilenetv3 / _deeplabv3_mobilenetv3 pick the same stages)."""
    import torchvision  # noqa: PLC0415
    from torchvision.models._utils import IntermediateLayerGetter  # noqa: PLC0415
    feats = torchvision.models.mobilenet_v3_small(width_mult=0.1, dilated=True).features
    stages = [0] + [i for i, b in enumerate(feats) if getattr(b, "_is_cn", False)] + [len(feats) - 1]
    low, high = stages[-4], stages[-1]
    layers = {str(low): "low", str(high): "high"} if low_stage else {str(high): "out"}
    return IntermediateLayerGetter(feats, layers), feats[low].out_channels, feats[high].out_channels


def lraspp_small(p):
    from torchvision.models.segmentation.lraspp import LRASPP  # noqa: PLC0415
    backbone, low_ch, high_ch = _mobilenet_stages(True)
    return zoo_models._SegOut(LRASPP(backbone, low_ch, high_ch, zoo_models.SEG_CLASSES, inter_channels=16))


def deeplabv3_small(p):
    from torchvision.models.segmentation.deeplabv3 import ASPP, DeepLabV3  # noqa: PLC0415
    backbone, _, high_ch = _mobilenet_stages(False)
    aspp = ASPP(high_ch, [12, 24, 36], 8)
    aspp.project[3].p = p
    head = nn.Sequential(aspp, nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, zoo_models.SEG_CLASSES, 1))
    return zoo_models._SegOut(DeepLabV3(backbone, head, None))


def fcn_small(p):
    """zoo_models.fcn's ResNet at widths 4, 4, 8, 8 (Bottleneck: 32 channels out)."""
    from torchvision.models._utils import IntermediateLayerGetter  # noqa: PLC0415
    from torchvision.models.resnet import Bottleneck, ResNet  # noqa: PLC0415
    from torchvision.models.segmentation.fcn import FCN, FCNHead  # noqa: PLC0415
    r = ResNet(Bottleneck, [1, 1, 1, 1], replace_stride_with_dilation=[False, True, True])
    r.inplanes, r.dilation = 4, 1
    r.conv1 = nn.Conv2d(3, 4, 7, 2, 3, bias=False)
    r.bn1 = nn.BatchNorm2d(4)
    r.layer1 = r._make_layer(Bottleneck, 4, 1)
    r.layer2 = r._make_layer(Bottleneck, 4, 1, stride=2)
    r.layer3 = r._make_layer(Bottleneck, 8, 1, stride=2, dilate=True)
    r.layer4 = r._make_layer(Bottleneck, 8, 1, stride=2, dilate=True)
    head = FCNHead(32, zoo_models.SEG_CLASSES)
    head[3].p = p
    return zoo_models._SegOut(FCN(IntermediateLayerGetter(r, {"layer4": "out"}), head, None))


def _zoo2():
    ids = [("input_ids", "ids", (SEQ,))]
    idm = ids + [("attention_mask", "mask", (SEQ,))]
    lm = dict(classes=VOCAB, label_shape=(SEQ,))
    z = {
        "unet2d": dict(_entry("diffusers/unet2d", UNetNoise, [("sample", "image", (3, 8, 8)),
                                                              ("timestep", "timestep", ())], 0, (3, 8, 8)),
                       loss="mse"),
        "wav2vec2": _entry("hf/wav2vec2", wav2vec2, [("input_values", "image", (400,))], 4, ()),
        "clip": _entry("hf/clip", ClipLogits, ids + [("pixel_values", "image", (3, 16, 16))], BATCH, ()),
        "whisper_dec": _entry("hf/whisper", WhisperDecoder, [("input_features", "image", (8, 32)),
                                                            ("decoder_input_ids", "ids", (SEQ,))], **lm),
        "lstm_lm": zoo_models.ZOO["lstm_lm"],
        "gru_lm": zoo_models.ZOO["gru_lm"],
        # torchvision segmentation: per-pixel cross-entropy over the class axis
        **{f"{name}_dyn": _entry(f"tv/segmentation/{name}", make, [("x", "image", (3, SEG_IMAGE, SEG_IMAGE))],
                                 zoo_models.SEG_CLASSES, (SEG_IMAGE, SEG_IMAGE), class_axis=1)
           for name, make in (("lraspp", lraspp_small), ("deeplabv3", deeplabv3_small), ("fcn", fcn_small))},
        "gpt2_op23": dict(_entry("hf/gpt2", gpt2_sdpa, ids, **lm), opset=23),
        "llama_op23": dict(_entry("hf/llama", llama_sdpa, ids, **lm), opset=23),
        "bert_op23": dict(_entry("hf/bert", bert_sdpa, idm, **lm), opset=23),
    }
    return z


ZOO2 = _zoo2()
