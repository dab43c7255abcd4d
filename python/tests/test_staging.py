"""The capture on a GPU (ttrace.staging), run by scripts/gpu-check.sh where there is one and
skipped elsewhere: recording a CUDA tensor returns while the device is still busy (no
synchronization), and what is stored is the tensor as it was when recorded, though the
training updates it in place at once on the same stream."""

import os
import tempfile
import unittest

import h5py
import numpy as np
import torch

import ttrace


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(256, 256)

    def forward(self, x):
        return self.fc(x)


@unittest.skipUnless(torch.cuda.is_available(), "no CUDA device: scripts/gpu-check.sh runs this")
class CudaStagingTest(unittest.TestCase):
    def test_recording_does_not_wait_for_the_device_and_keeps_the_values_recorded(self):
        model = Tiny().cuda()
        stream = torch.cuda.current_stream()
        with tempfile.TemporaryDirectory() as tmp:
            cap = ttrace.Capture(model, tmp, iterations=[0])
            with cap.step(0):
                before = {n: p.detach().cpu().clone() for n, p in model.named_parameters()}
                torch.cuda.synchronize()
                torch.cuda._sleep(2_000_000_000)  # keeps the stream busy for a while
                cap.record_params()
                # the record returned with the device still busy: nothing waited for it
                self.assertFalse(stream.query(), "recording waited for the device")
                with torch.no_grad():
                    for p in model.parameters():
                        p.add_(1.0)  # queued after the copies: they must see the old values
                x = torch.randn(8, 256, device="cuda")
                model(x).sum().backward()
            cap.close()
            with h5py.File(os.path.join(tmp, "rank00000.h5")) as f:
                stored = {ds.attrs["name"]: ds[()] for ds in f["tensors"].values()
                          if ds.attrs["kind"] == "param"}
        self.assertEqual(sorted(stored), ["fc.bias", "fc.weight"])
        for name, values in stored.items():
            np.testing.assert_array_equal(values, before[name].numpy(), err_msg=name)

    def test_fp4_and_its_scales_in_device_memory(self):
        # fp4 unpacked on the device, its block and tensor scales copied with it
        codes = torch.arange(64, dtype=torch.uint8, device="cuda").reshape(2, 32) % 16
        packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).contiguous()
        scales = torch.tensor([[1.0, 0.5], [2.0, 0.25]], device="cuda")
        with tempfile.TemporaryDirectory() as tmp:
            cap = ttrace.Capture(Tiny().cuda(), tmp, iterations=[0], dtype_recipe="fp4")
            with cap.step(0):
                cap.record_fp4("fc", "forward_input", 1, packed.view(torch.float4_e2m1fn_x2),
                               scales, block=(1, 16), scale_format="e4m3",
                               tensor_scale_inv=torch.tensor(0.25, device="cuda"))
                scales.mul_(3.0)  # after the record: not what is stored
            cap.close()
            with h5py.File(os.path.join(tmp, "rank00000.h5")) as f:
                (key, ds), = f["tensors"].items()
                np.testing.assert_array_equal(ds[()], packed.cpu().numpy())
                np.testing.assert_array_equal(f["scale_inv"][key][()], [[1.0, 0.5], [2.0, 0.25]])
                self.assertEqual(ds.attrs["tensor_scale_inv"], 0.25)


if __name__ == "__main__":
    unittest.main()
