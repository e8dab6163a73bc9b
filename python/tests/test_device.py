"""The trainer's device side without a master (parameter_mirror.py,
flat_gradient.py): the model's parameters follow the pulled buffer and the
pushed gradient is the model's, on the CPU and, where PyTorch sees a GPU, on
CUDA against the same model on the CPU (as model_test's CudaMatchesCpu).
The CUDA cases skip without a GPU, as CudaMatchesCpu does."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from gaptrain.flat_gradient import FlatGradient  # noqa: E402
from gaptrain.parameter_mirror import ParameterMirror, parameter_device, to_device  # noqa: E402


def small_cnn():
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 14 * 14, 10))


def flat_size(model):
    return sum(p.numel() for p in model.parameters())


class DeviceSideTest(unittest.TestCase):
    def test_cpu_parameters_are_views_and_batches_stay(self):
        model = small_cnn()
        host = torch.empty(flat_size(model))
        mirror = ParameterMirror(list(model.parameters()), host)
        self.assertEqual(mirror.device, torch.device("cpu"))
        host.fill_(0.5)
        mirror.load()  # nothing to copy: the parameters are the buffer
        self.assertTrue(all(torch.all(p == 0.5) for p in model.parameters()))
        batch = (torch.ones(2, 3), {"y": torch.zeros(2)})
        self.assertIs(to_device(batch, torch.device("cpu")), batch)

    def test_parameters_on_several_devices_have_no_one_device(self):
        params = [torch.zeros(2), torch.zeros(2, device="meta")]
        self.assertIsNone(parameter_device(params))
        self.assertEqual(parameter_device([torch.zeros(1)]), torch.device("cpu"))


@unittest.skipUnless(torch.cuda.is_available(), "no CUDA device")
class CudaMatchesCpuTest(unittest.TestCase):
    def test_parameters_follow_the_pulled_buffer_in_one_copy(self):
        model = small_cnn().cuda()
        before = torch.cat([p.detach().reshape(-1).cpu() for p in model.parameters()])
        host = torch.empty(flat_size(model), pin_memory=True)
        mirror = ParameterMirror(list(model.parameters()), host)
        self.assertEqual(mirror.device.type, "cuda")
        self.assertTrue(torch.equal(host, before))  # the model's values were kept
        self.assertTrue(all(p.is_cuda for p in model.parameters()))
        host.copy_(torch.linspace(-1, 1, host.numel()))
        mirror.load()
        after = torch.cat([p.detach().reshape(-1).cpu() for p in model.parameters()])
        self.assertTrue(torch.equal(after, host))

    def test_the_pushed_gradient_is_the_cpu_models(self):
        torch.manual_seed(5)
        cpu_model = small_cnn()
        gpu_model = small_cnn()
        gpu_model.load_state_dict(cpu_model.state_dict())
        gpu_model.cuda()
        cpu_grad, gpu_grad = FlatGradient(cpu_model.parameters()), FlatGradient(
            gpu_model.parameters())
        loss_fn = nn.CrossEntropyLoss()
        for step in range(3):
            x, y = torch.randn(16, 1, 28, 28), torch.randint(0, 10, (16,))
            losses = []
            for model, grad, device in ((cpu_model, cpu_grad, torch.device("cpu")),
                                        (gpu_model, gpu_grad, torch.device("cuda"))):
                grad.zero(model)
                loss = loss_fn(model(to_device(x, device)), to_device(y, device))
                loss.backward()
                losses.append(float(loss.detach()))
            g_cpu, g_gpu = cpu_grad.gradient(), gpu_grad.gradient()
            self.assertEqual(g_gpu.device.type, "cpu")  # on the host, ready to push
            scale = g_cpu.abs().max().item()
            self.assertLess((g_cpu - g_gpu).abs().max().item(), 1e-3 * scale + 1e-6,
                            "step %d" % step)
            self.assertAlmostEqual(losses[0], losses[1], delta=1e-4 * (1 + abs(losses[0])))


if __name__ == "__main__":
    unittest.main()
