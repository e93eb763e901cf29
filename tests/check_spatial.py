#!/usr/bin/python3
"""check_spatial.py — issue 26's spatial ops against PyTorch 1.13: exports small
models that use F.interpolate (bilinear, bicubic with align_corners, nearest; by
scale_factor and by a size read from another tensor's shape, as LRASPP does) at
opsets 9 (Upsample), 10 (Resize-10) and 11 / 13 (Resize), and ConvTranspose1d / 2d
(stride, pads, output_padding, dilation, groups, with and without bias), and
pixel_shuffle (DepthToSpace, CRD); runs
`onnxtrain grad` on each and compares the loss and every parameter gradient with
torch's. Fails above
1e-5 absolute plus 1e-5 relative to the gradient's largest magnitude.

    check_spatial.py ONNXTRAIN_BINARY SCRATCH_DIR
"""
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import torch
import torch.nn.functional as F


def grad(binary, model, x, out_dir):
    p = subprocess.run([binary, "grad", model, "--input", x, "--loss", "output", "--dump-grads", out_dir, "--json"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("onnxtrain grad %s failed (%d): %s%s" % (model, p.returncode, p.stdout, p.stderr))
    res = json.loads(p.stdout)
    with open(os.path.join(out_dir, "index.json")) as f:
        index = json.load(f)
    return res, {k: np.load(os.path.join(out_dir, v)) for k, v in index.items()}


class Interp(torch.nn.Module):
    """Conv, then resizes in sequence, then a weighted sum (the loss)."""

    def __init__(self, full):
        super().__init__()
        torch.manual_seed(26)
        self.conv = torch.nn.Conv2d(2, 3, 3, padding=1)
        self.full = full
        self.register_buffer("w1", torch.randn(1, 3, 10, 12) if full else torch.randn(1, 3, 10, 12))

    def forward(self, x):
        h = self.conv(x)
        if self.full:
            a = F.interpolate(h, scale_factor=2, mode="bilinear", align_corners=False)  # 10 x 12
            b = F.interpolate(a, size=(7, 9), mode="bicubic", align_corners=True)
            c = F.interpolate(b, size=(4, 5), mode="bilinear", align_corners=False)  # downscale
            d = F.interpolate(c, size=h.shape[-2:], mode="bilinear", align_corners=False)  # LRASPP's form
            e = F.interpolate(d + h, scale_factor=2, mode="nearest")
        else:
            e = F.interpolate(h, scale_factor=2, mode="nearest")
        return (e * self.w1).sum()


class Deconv(torch.nn.Module):
    """A decoder's transposed convolutions: 2-D k3 s2 p1 output_padding 1, k4 s2 p1
    without bias, and a grouped, dilated 1-D one over the flattened rows."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(27)
        self.up1 = torch.nn.ConvTranspose2d(2, 4, 3, stride=2, padding=1, output_padding=1)
        self.up2 = torch.nn.ConvTranspose2d(4, 4, 4, stride=2, padding=1, bias=False)
        self.up3 = torch.nn.ConvTranspose1d(4, 6, 3, stride=2, padding=2, dilation=2, groups=2)
        self.register_buffer("w1", torch.randn(2, 6, 84))

    def forward(self, x):
        h = self.up2(torch.relu(self.up1(x)))  # [2, 4, 20, 24]
        h = self.up3(h.mean(dim=3))  # [2, 6, 2 * 19 - 4 + 5 = 39] -> see w1
        return (h * self.w1[:, :, : h.shape[2]]).sum()


class Shuffle(torch.nn.Module):
    """ESPCN's sub-pixel upsampler: conv to C r^2 channels, pixel_shuffle (exported
    as DepthToSpace CRD), then a conv."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(28)
        self.conv1 = torch.nn.Conv2d(2, 12, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(3, 2, 3, padding=1)
        self.register_buffer("w1", torch.randn(2, 2, 10, 12))

    def forward(self, x):
        h = F.pixel_shuffle(self.conv1(x), 2)  # [2, 3, 10, 12]
        return (self.conv2(torch.tanh(h)) * self.w1).sum()


def check(binary, scratch, opset, full):
    if full == "shuffle":
        label, m, x = "opset %d (DepthToSpace)" % opset, Shuffle(), torch.randn(2, 2, 5, 6)
        full = 3
    elif full == "deconv":
        label, m, x = "opset %d (ConvTranspose)" % opset, Deconv(), torch.randn(2, 2, 5, 6)
        full = 2
    else:
        label = "opset %d%s" % (opset, " (bilinear, bicubic, nearest)" if full else " (nearest)")
        m = Interp(full)
        x = torch.randn(1, 2, 5, 6)
    path = os.path.join(scratch, "interp_%d_%d.onnx" % (opset, full))
    xpath = os.path.join(scratch, "x.npy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (x,), path, opset_version=opset, do_constant_folding=False,
                          training=torch.onnx.TrainingMode.TRAINING, input_names=["x"], output_names=["loss"])
    np.save(xpath, x.numpy())
    res, ours = grad(binary, path, xpath, os.path.join(scratch, "g_%d_%d" % (opset, full)))
    m.zero_grad()
    loss = m(x)
    loss.backward()
    bad = 0
    if abs(res["loss"] - loss.item()) > 1e-5 * max(1.0, abs(loss.item())):
        print("%s: loss %r, PyTorch %r" % (label, res["loss"], loss.item()))
        bad += 1
    for name, p in m.named_parameters():
        want, got = p.grad.numpy(), ours.get(name)
        if got is None or got.shape != want.shape:
            print("%s: %s missing or misshapen" % (label, name))
            bad += 1
            continue
        diff, top = float(np.max(np.abs(got - want))), float(np.max(np.abs(want)))
        print("%s: %-12s max abs diff %.3g (largest |grad| %.3g)" % (label, name, diff, top))
        if not diff <= 1e-5 + 1e-5 * top:
            bad += 1
    return bad


def main():
    binary, scratch = sys.argv[1:3]
    os.makedirs(scratch, exist_ok=True)
    bad = check(binary, scratch, 9, False) + check(binary, scratch, 10, False)
    bad += check(binary, scratch, 11, True) + check(binary, scratch, 13, True)
    bad += check(binary, scratch, 13, "deconv") + check(binary, scratch, 13, "shuffle")
    if bad:
        sys.exit("check_spatial: %d mismatch(es) with PyTorch" % bad)
    print("check_spatial: every gradient matches PyTorch")


if __name__ == "__main__":
    main()
