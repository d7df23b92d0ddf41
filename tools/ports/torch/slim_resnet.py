"""PyTorch port of the tf_slim network in goldens/slim_resnet.h5: resnet_v1 with a root block and
two bottleneck blocks (slim.nets.resnet_v1), batch norm after every convolution, trained with
momentum SGD and slim's L2 regularizer.

Written in torch's terms with TF's conventions spelled out: NHWC batches permuted to NCHW; a
convolution with its batch norm as one module named after slim's scope (`conv1`, and its
`BatchNorm`), so each pairs with TF1's variables by name; slim's batch norm decay 0.997 is torch's
momentum 1 - 0.997, computed as TF1 computes it, in float32 (0.0030000210: a momentum of 0.003 moves
the averages 7e-6 of their value less each step, which teacher forcing shows), its epsilon 1e-5; the root's 3x3 max-pooling of stride 2 with TF's SAME padding,
which puts its one row and column of padding at the bottom and right (torch's padding=1 would put
one on each side); slim's `l2_regularizer(1e-4)` is 1e-4 x sum(w^2) / 2, added to the loss and
returned as the golden's `loss/regularization`.

`make()` returns (model, step, {"optimizer": ..., "var_map": ...}); its keyword arguments build wrong
ports: symmetric_pool=True pools with torch's symmetric padding, momentum=0.997 gives torch slim's
decay where torch means 1 - it, nesterov=True takes Nesterov's momentum where slim's
MomentumOptimizer takes the plain one.
"""

import numpy as np
import torch
import torch.nn.functional as F

DECAY, EPSILON, L2 = 0.997, 1e-5, 1e-4
MOMENTUM = float(np.float32(1) - np.float32(DECAY))  # TF1's 1 - decay, in float32


class ConvBN(torch.nn.Conv2d):
    """slim.conv2d (no bias) with batch_norm: stride > 1 pads explicitly then convolves VALID, as
    resnet_utils.conv2d_same does (symmetric for these kernels)."""

    def __init__(self, channels_in, channels, kernel, stride=1, relu=True, momentum=MOMENTUM):
        super().__init__(channels_in, channels, kernel, stride, padding=(kernel - 1) // 2, bias=False)
        self.BatchNorm = torch.nn.BatchNorm2d(channels, eps=EPSILON, momentum=momentum)
        self.relu = relu

    def forward(self, x):
        x = self.BatchNorm(super().forward(x))
        return torch.relu(x) if self.relu else x


class Bottleneck(torch.nn.Module):
    def __init__(self, depth_in, depth, bottleneck, stride, momentum):
        super().__init__()
        self.shortcut = ConvBN(depth_in, depth, 1, stride, relu=False, momentum=momentum)
        self.conv1 = ConvBN(depth_in, bottleneck, 1, momentum=momentum)
        self.conv2 = ConvBN(bottleneck, bottleneck, 3, stride, momentum=momentum)
        self.conv3 = ConvBN(bottleneck, depth, 1, relu=False, momentum=momentum)

    def forward(self, x):
        return torch.relu(self.shortcut(x) + self.conv3(self.conv2(self.conv1(x))))


class ResNetSmall(torch.nn.Module):
    def __init__(self, classes=10, symmetric_pool=False, momentum=MOMENTUM):
        super().__init__()
        self.conv1 = ConvBN(3, 64, 7, 2, momentum=momentum)
        self.block1 = Bottleneck(64, 32, 8, 2, momentum)
        self.block2 = Bottleneck(32, 64, 16, 1, momentum)
        self.logits = torch.nn.Conv2d(64, classes, 1)
        self.symmetric_pool = symmetric_pool

    def forward(self, x):
        x = self.conv1(x.permute(0, 3, 1, 2))
        if self.symmetric_pool:
            x = F.max_pool2d(x, 3, 2, padding=1)
        else:  # TF's SAME: the padding at the bottom and right
            x = F.max_pool2d(F.pad(x, (0, 1, 0, 1), value=float("-inf")), 3, 2)
        x = self.block2(self.block1(x))
        return self.logits(x.mean(dim=(2, 3), keepdim=True)).flatten(1)


def make(symmetric_pool=False, momentum=MOMENTUM, nesterov=False):
    model = ResNetSmall(symmetric_pool=symmetric_pool, momentum=momentum)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, nesterov=nesterov)
    kernels = [m.weight for m in model.modules() if isinstance(m, torch.nn.Conv2d)]

    def step(inputs):
        optimizer.zero_grad()
        images, labels = inputs["IteratorGetNext:0"], inputs["IteratorGetNext:1"].long()
        regularization = sum(L2 * (k * k).sum() / 2 for k in kernels)
        loss = F.cross_entropy(model(images), labels) + regularization
        loss.backward()
        optimizer.step()
        return {"loss": loss, "loss/regularization": regularization}

    # slim's scopes: resnet_small/block1/unit_1/bottleneck_v1/conv1/... is the module block1.conv1
    var_map = [(r"^resnet_small/(block\d)/unit_1/bottleneck_v1/", r"\1/")]
    return model, step, {"optimizer": optimizer, "var_map": var_map}
