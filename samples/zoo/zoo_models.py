"""zoo_models.py — the model zoo's table: tiny random-weight instances of torchvision's
classification models and HuggingFace transformers (tiny configs, no downloads).

Each entry builds one model for a dropout probability p (0 gives the reference model:
PyTorch's RNG cannot match onnxtrain's Philox masks) and says what data it takes. The
widths are cut so each model is at most a few MB; the layer structure (block types,
attention, norms, masks) is the real one, since that is what decides which ops export.
"""
import torch
import torch.nn as nn

BATCH = 4  # BatchNorm sees BATCH*H*W values per channel: >= 4 even at 1x1 (ResNet's last stage)
SEQ = 8
VOCAB = 64
CLASSES = 10
IMAGE = 64


def _tv():
    import torchvision.models as tvm  # noqa: PLC0415 (only when a torchvision model is built)
    return tvm


# ---- torchvision ---------------------------------------------------------------------

def resnet18(p):
    from torchvision.models.resnet import BasicBlock, ResNet
    m = ResNet(BasicBlock, [2, 2, 2, 2], num_classes=CLASSES)
    # ResNet hard-codes widths 64..512: rebuild the same layers at 8..64.
    m.inplanes = 8
    m.conv1 = nn.Conv2d(3, 8, 7, 2, 3, bias=False)
    m.bn1 = nn.BatchNorm2d(8)
    m.layer1 = m._make_layer(BasicBlock, 8, 2)
    m.layer2 = m._make_layer(BasicBlock, 16, 2, stride=2)
    m.layer3 = m._make_layer(BasicBlock, 32, 2, stride=2)
    m.layer4 = m._make_layer(BasicBlock, 64, 2, stride=2)
    m.fc = nn.Linear(64, CLASSES)
    return m


def vgg11(p):
    from torchvision.models.vgg import VGG, make_layers
    m = VGG(make_layers([8, "M", 16, "M", 32, 32, "M", 64, 64, "M", 64, 64, "M"], batch_norm=False),
            num_classes=CLASSES, dropout=p)
    # 64x64 input ends at 2x2; AdaptiveAvgPool2d((7, 7)) of 1x1 does not export.
    m.avgpool = nn.AdaptiveAvgPool2d((1, 1))
    m.classifier = nn.Sequential(nn.Linear(64, 64), nn.ReLU(True), nn.Dropout(p),
                                 nn.Linear(64, 64), nn.ReLU(True), nn.Dropout(p), nn.Linear(64, CLASSES))
    return m


def densenet121(p):
    from torchvision.models.densenet import DenseNet
    return DenseNet(growth_rate=4, block_config=(6, 12, 24, 16), num_init_features=8, bn_size=2,
                    drop_rate=p, num_classes=CLASSES)


def mobilenet_v2(p):
    return _tv().mobilenet_v2(width_mult=0.25, num_classes=CLASSES, dropout=p)


def mobilenet_v3_small(p):
    return _tv().mobilenet_v3_small(width_mult=0.25, reduced_tail=True, num_classes=CLASSES, dropout=p)


def efficientnet_b0(p):
    from torchvision.models.efficientnet import EfficientNet, _efficientnet_conf
    setting, last = _efficientnet_conf("efficientnet_b0", width_mult=0.25, depth_mult=0.5)
    return EfficientNet(setting, dropout=p, stochastic_depth_prob=0.0,
                        num_classes=CLASSES, last_channel=last)


def regnet(p):
    from torchvision.models.regnet import BlockParams, RegNet
    params = BlockParams.from_init_params(depth=4, w_0=8, w_a=8.0, w_m=2.0, group_width=4, se_ratio=0.25)
    return RegNet(params, num_classes=CLASSES, stem_width=8)


def convnext_tiny(p):
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    cfg = [CNBlockConfig(8, 16, 1), CNBlockConfig(16, 32, 1), CNBlockConfig(32, 64, 2), CNBlockConfig(64, None, 1)]
    return ConvNeXt(cfg, stochastic_depth_prob=0.0, num_classes=CLASSES)


def shufflenet_v2(p):
    from torchvision.models.shufflenetv2 import ShuffleNetV2
    return ShuffleNetV2([2, 4, 2], [8, 16, 32, 64, 128], num_classes=CLASSES)


def squeezenet(p):
    from torchvision.models.squeezenet import SqueezeNet
    return SqueezeNet(version="1_1", num_classes=CLASSES, dropout=p)


class _Narrow:
    """GoogLeNet hard-codes its Inception widths; all are multiples of 8, so dividing
    every width by 8 keeps the concatenations consistent."""

    @staticmethod
    def conv(cin, cout, **kw):
        from torchvision.models.googlenet import BasicConv2d
        return BasicConv2d(cin if cin == 3 else cin // 8, cout // 8, **kw)

    @staticmethod
    def inception(*widths, **kw):
        from torchvision.models.googlenet import Inception
        return Inception(*[w // 8 for w in widths], **kw)


def googlenet(p):
    from torchvision.models.googlenet import GoogLeNet, InceptionAux
    m = GoogLeNet(num_classes=CLASSES, aux_logits=False, transform_input=False, init_weights=True,
                  blocks=[_Narrow.conv, _Narrow.inception, InceptionAux], dropout=p)
    m.fc = nn.Linear(1024 // 8, CLASSES)
    return m


def mnasnet(p):
    from torchvision.models.mnasnet import MNASNet
    return MNASNet(0.25, num_classes=CLASSES, dropout=p)


def vit_tv(p):
    from torchvision.models.vision_transformer import VisionTransformer
    return VisionTransformer(image_size=IMAGE, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32,
                             mlp_dim=64, dropout=p, attention_dropout=p, num_classes=CLASSES)


def swin_t(p):
    from torchvision.models.swin_transformer import SwinTransformer
    return SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 2], window_size=[4, 4],
                           dropout=p, attention_dropout=p, stochastic_depth_prob=0.0,
                           num_classes=CLASSES)


# ---- HuggingFace ---------------------------------------------------------------------

def _hf(cls_name, cfg_name, **cfg):
    import transformers
    config = getattr(transformers, cfg_name)(**cfg)
    config._attn_implementation = "eager"  # torch 1.13 has no SDPA; eager is what exports
    return getattr(transformers, cls_name)(config)


def _dec(p, **extra):
    """Shared tiny decoder-only sizes (LLaMA, Mistral, Qwen2)."""
    return dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                attention_dropout=p, **extra)


HF = {
    "gpt2": lambda p: _hf("GPT2LMHeadModel", "GPT2Config", vocab_size=VOCAB, n_positions=32, n_embd=32,
                          n_layer=2, n_head=2, resid_pdrop=p, embd_pdrop=p, attn_pdrop=p),
    "bert": lambda p: _hf("BertForMaskedLM", "BertConfig", vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=64, max_position_embeddings=32,
                          hidden_dropout_prob=p, attention_probs_dropout_prob=p),
    "distilbert": lambda p: _hf("DistilBertForSequenceClassification", "DistilBertConfig", vocab_size=VOCAB,
                                dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=32,
                                dropout=p, attention_dropout=p, seq_classif_dropout=p, num_labels=3),
    "roberta": lambda p: _hf("RobertaForMaskedLM", "RobertaConfig", vocab_size=VOCAB, hidden_size=32,
                             num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                             max_position_embeddings=40, hidden_dropout_prob=p, attention_probs_dropout_prob=p),
    "llama": lambda p: _hf("LlamaForCausalLM", "LlamaConfig", **_dec(p)),
    "mistral": lambda p: _hf("MistralForCausalLM", "MistralConfig", sliding_window=4, **_dec(p)),
    "qwen2": lambda p: _hf("Qwen2ForCausalLM", "Qwen2Config", **_dec(p)),
    "phi": lambda p: _hf("PhiForCausalLM", "PhiConfig", vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=2, max_position_embeddings=32,
                         partial_rotary_factor=0.5, resid_pdrop=p, embd_pdrop=p, attention_dropout=p),
    "gpt_neox": lambda p: _hf("GPTNeoXForCausalLM", "GPTNeoXConfig", vocab_size=VOCAB, hidden_size=32,
                              num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                              max_position_embeddings=32, rotary_pct=0.5, hidden_dropout=p, attention_dropout=p),
    "opt": lambda p: _hf("OPTForCausalLM", "OPTConfig", vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                         ffn_dim=64, num_attention_heads=2, max_position_embeddings=32, word_embed_proj_dim=32,
                         dropout=p, attention_dropout=p),
    "t5": lambda p: _hf("T5ForConditionalGeneration", "T5Config", vocab_size=VOCAB, d_model=32, d_kv=16,
                        d_ff=64, num_layers=2, num_heads=2, relative_attention_num_buckets=8, dropout_rate=p,
                        decoder_start_token_id=0),
    "bart": lambda p: _hf("BartForConditionalGeneration", "BartConfig", vocab_size=VOCAB, d_model=32,
                          encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2,
                          encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=32, dropout=p,
                          attention_dropout=p, activation_dropout=p),
    "hf_vit": lambda p: _hf("ViTForImageClassification", "ViTConfig", image_size=16, patch_size=4, hidden_size=32,
                            num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, num_labels=CLASSES,
                            hidden_dropout_prob=p, attention_probs_dropout_prob=p),
    "whisper_enc": lambda p: _hf("WhisperForAudioClassification", "WhisperConfig", vocab_size=VOCAB,
                                 num_mel_bins=8, encoder_layers=2, encoder_attention_heads=2, decoder_layers=1,
                                 decoder_attention_heads=2, d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64,
                                 max_source_positions=16, max_target_positions=16, num_labels=4, dropout=p,
                                 attention_dropout=p, activation_dropout=p),
}

# ---- torchvision segmentation (issue 26) ---------------------------------------------

SEG_CLASSES = 5


class _SegOut(nn.Module):
    """torchvision's segmentation models return {"out": logits}: the logits alone."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def lraspp(p):
    """LRASPP over a dilated MobileNetV3-Large (width 0.25): per-pixel logits
    [batch, SEG_CLASSES, 64, 64], brought back to the input's size by bilinear Resizes
    whose sizes come from the input's shape."""
    from torchvision.models.segmentation.lraspp import _lraspp_mobilenetv3
    return _SegOut(_lraspp_mobilenetv3(_tv().mobilenet_v3_large(width_mult=0.25, dilated=True), SEG_CLASSES))


def deeplabv3(p):
    """DeepLabV3 over the same backbone; its head (ASPP with rates 12, 24, 36, whose
    pooling branch is resized back by a bilinear Resize) cut from 256 to 32 channels."""
    from torchvision.models.segmentation.deeplabv3 import ASPP, _deeplabv3_mobilenetv3
    m = _deeplabv3_mobilenetv3(_tv().mobilenet_v3_large(width_mult=0.25, dilated=True), SEG_CLASSES, False)
    aspp = ASPP(m.classifier[0].convs[0][0].in_channels, [12, 24, 36], 32)
    aspp.project[3].p = p
    m.classifier = nn.Sequential(aspp, nn.Conv2d(32, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
                                 nn.Conv2d(32, SEG_CLASSES, 1))
    return _SegOut(m)


def fcn(p):
    """FCN over a dilated Bottleneck ResNet (one block per stage, widths 8..64, strides
    replaced by dilation in the last two stages as torchvision's fcn_resnet50 does)."""
    from torchvision.models._utils import IntermediateLayerGetter
    from torchvision.models.resnet import Bottleneck, ResNet
    from torchvision.models.segmentation.fcn import FCN, FCNHead
    r = ResNet(Bottleneck, [1, 1, 1, 1], replace_stride_with_dilation=[False, True, True])
    r.inplanes, r.dilation = 8, 1
    r.conv1 = nn.Conv2d(3, 8, 7, 2, 3, bias=False)
    r.bn1 = nn.BatchNorm2d(8)
    r.layer1 = r._make_layer(Bottleneck, 8, 1)
    r.layer2 = r._make_layer(Bottleneck, 16, 1, stride=2)
    r.layer3 = r._make_layer(Bottleneck, 32, 1, stride=2, dilate=True)
    r.layer4 = r._make_layer(Bottleneck, 64, 1, stride=2, dilate=True)
    head = FCNHead(256, SEG_CLASSES)
    head[3].p = p
    return _SegOut(FCN(IntermediateLayerGetter(r, {"layer4": "out"}), head, None))


class RNNLM(nn.Module):
    """A recurrent language model as PyTorch's word_language_model example builds it:
    Embedding, a 2-layer batch-first nn.LSTM or nn.GRU, Dropout, Linear to the
    vocabulary. Both exporters write the LSTM / GRU op (one per layer). No dropout between
    the recurrent layers: PyTorch 1.13's TorchScript exporter refuses it in training mode
    ("ONNX export of operator RNN/GRU/LSTM, dropout in training mode")."""

    def __init__(self, cell, p):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 16)
        self.rnn = getattr(nn, cell)(16, 16, num_layers=2, batch_first=True)
        self.drop = nn.Dropout(p)
        self.head = nn.Linear(16, VOCAB)

    def forward(self, input_ids):
        out, _ = self.rnn(self.embed(input_ids))
        return self.head(self.drop(out))


TV = {"resnet18": resnet18, "vgg11": vgg11, "densenet121": densenet121, "mobilenet_v2": mobilenet_v2,
      "mobilenet_v3_small": mobilenet_v3_small, "efficientnet_b0": efficientnet_b0, "regnet": regnet,
      "convnext_tiny": convnext_tiny, "shufflenet_v2": shufflenet_v2, "squeezenet": squeezenet,
      "googlenet": googlenet, "mnasnet": mnasnet, "vit": vit_tv, "swin_t": swin_t}


def _torch2(builder):
    """zoo_torch2.py's builder, imported when the model is built (zoo_torch2 imports this file)."""
    return lambda p: getattr(__import__("zoo_torch2"), builder)(p)


def _entry(family, make, inputs, classes, label_shape, dynseq=False, class_axis=-1):
    return dict(family=family, make=make, inputs=inputs, classes=classes, label_shape=label_shape, dynseq=dynseq,
                class_axis=class_axis)


def _zoo():
    z = {}
    img = [("x", "image", (3, IMAGE, IMAGE))]
    for name, make in TV.items():
        z[name] = _entry(f"tv/{name}", make, img, CLASSES, ())
    for name, make in (("lraspp", lraspp), ("deeplabv3", deeplabv3), ("fcn", fcn)):
        z[name] = _entry(f"tv/segmentation/{name}", make, img, SEG_CLASSES, (IMAGE, IMAGE), class_axis=1)
    ids = [("input_ids", "ids", (SEQ,))]
    idm = ids + [("attention_mask", "mask", (SEQ,))]
    lm = dict(classes=VOCAB, label_shape=(SEQ,))
    z["gpt2"] = _entry("hf/gpt2", HF["gpt2"], ids, **lm)
    z["gpt2_mask"] = _entry("hf/gpt2", HF["gpt2"], idm, **lm)
    z["gpt2_dynseq"] = _entry("hf/gpt2", HF["gpt2"], ids, dynseq=True, **lm)
    z["bert"] = _entry("hf/bert", HF["bert"], idm, **lm)
    z["bert_ids"] = _entry("hf/bert", HF["bert"], ids, **lm)
    z["bert_dynseq"] = _entry("hf/bert", HF["bert"], idm, dynseq=True, **lm)
    z["distilbert"] = _entry("hf/distilbert", HF["distilbert"], idm, 3, ())
    z["roberta"] = _entry("hf/roberta", HF["roberta"], idm, **lm)
    for name in ("llama", "mistral", "qwen2", "phi", "gpt_neox", "opt"):
        z[name] = _entry(f"hf/{name}", HF[name], ids, **lm)
    z["llama_mask"] = _entry("hf/llama", HF["llama"], idm, **lm)
    s2s = idm + [("decoder_input_ids", "ids", (SEQ,))]
    z["t5"] = _entry("hf/t5", HF["t5"], s2s, **lm)
    z["bart"] = _entry("hf/bart", HF["bart"], s2s, **lm)
    z["lstm_lm"] = _entry("nn/lstm", lambda p: RNNLM("LSTM", p), ids, **lm)
    z["gru_lm"] = _entry("nn/gru", lambda p: RNNLM("GRU", p), ids, **lm)
    z["hf_vit"] = _entry("hf/vit", HF["hf_vit"], [("pixel_values", "image", (3, 16, 16))], CLASSES, ())
    z["whisper_enc"] = _entry("hf/whisper-encoder", HF["whisper_enc"], [("input_features", "image", (8, 32))], 4, ())
    # The dynamo fixtures' families (zoo_torch2.py: the same builders and data) through
    # PyTorch 1.13's TorchScript exporter; UNet2DModel needs diffusers (.ci/install_zoo.sh).
    z["wav2vec2_ts"] = _entry("hf/wav2vec2", _torch2("wav2vec2"), [("input_values", "image", (400,))], 4, ())
    # CLIP's temperature logit_scale is a parameter of rank 0, which onnxtrain keeps
    # constant unless a --train pattern names it (docs/training.md, "Which initializers
    # train"): "*" trains every parameter, as PyTorch does.
    z["clip_ts"] = dict(_entry("hf/clip", _torch2("ClipLogits"), ids + [("pixel_values", "image", (3, 16, 16))],
                               BATCH, ()), train_regex="*")
    z["whisper_dec_ts"] = _entry("hf/whisper", _torch2("WhisperDecoder"), [("input_features", "image", (8, 32)),
                                                                          ("decoder_input_ids", "ids", (SEQ,))], **lm)
    z["unet2d_ts"] = dict(_entry("diffusers/unet2d", _torch2("UNetNoise"), [("sample", "image", (3, 8, 8)),
                                                                          ("timestep", "timestep", ())], 0, (3, 8, 8)),
                          loss="mse")
    return z


ZOO = _zoo()


def make_inputs(entry, n, seed):
    """Deterministic data: images ~N(0,1), ids uniform in the vocab, masks with the last
    positions of the second sample padded (0), labels uniform in the classes."""
    gen = torch.Generator().manual_seed(seed)
    data = {}
    for name, kind, shape in entry["inputs"]:
        if kind == "image":
            data[name] = torch.randn((n,) + shape, generator=gen)
        elif kind == "timestep":  # a diffusion step per sample
            data[name] = torch.randint(0, 1000, (n,) + shape, generator=gen, dtype=torch.int64)
        elif kind == "ids":
            data[name] = torch.randint(2, VOCAB, (n,) + shape, generator=gen, dtype=torch.int64)
        else:
            mask = torch.ones((n,) + shape, dtype=torch.int64)
            mask[1::2, shape[0] - 3:] = 0
            data[name] = mask
    if entry.get("loss") == "mse":  # regression targets (a diffusion model's noise)
        return data, torch.randn((n,) + entry["label_shape"], generator=gen)
    labels = torch.randint(0, entry["classes"], (n,) + entry["label_shape"], generator=gen, dtype=torch.int64)
    return data, labels
