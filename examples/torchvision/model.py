"""torchvision's ResNet-18 for 28x28 grey images, as it is usually adapted
to small images (CIFAR, Fashion-MNIST): a 3x3 stride-1 first convolution of
one input channel instead of the 7x7 stride-2 one of three, and 10 classes.
Its 20 BatchNorm layers keep running statistics, which the trainers send to
the master; gaptrain export writes them, so the state_dict loads with
strict=True into this same function's module."""

from torch import nn
import torchvision


def resnet18_for_fashion_mnist():
    model = torchvision.models.resnet18(num_classes=10)
    model.conv1 = nn.Conv2d(1, 64, kernel_size=3, stride=1, padding=1, bias=False)
    return model
