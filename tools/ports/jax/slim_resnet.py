"""JAX port of the tf_slim network in goldens/slim_resnet.h5: resnet_v1 with a root block and two
bottleneck blocks (slim.nets.resnet_v1), batch norm after every convolution, trained with momentum
SGD and slim's L2 regularizer.

Written in flax's terms with TF's conventions spelled out: flax is NHWC and HWIO as TF is; a
convolution and its batch norm as one module named after slim's scope (`conv1` holding `conv` and
`BatchNorm`), paired with TF1's variables by a var_map of rules; slim's batch norm as TF1's fused
kernel trains it (tf_forms.FusedBatchNorm: the moving variance with Bessel's correction), decay
0.997, epsilon 1e-5; the root's 3x3 max-pooling of stride 2 with padding "SAME", which flax pads as
TF does (the one row and column at the bottom and right); slim's `l2_regularizer(1e-4)` is 1e-4 x
sum(w^2) / 2, added to the loss and returned as the golden's `loss/regularization`.

`make()` returns (train state, step, {"var_map": ...}); its keyword arguments build wrong ports:
flax_batch_norm=True uses flax's BatchNorm (the biased moving variance), symmetric_pool=True pads
the pooling one on each side (as a PyTorch habit would), decay=0.99 leaves flax's default momentum.
"""

import jax
import jax.numpy as jnp
import optax
from flax import linen as nn

from . import TrainState
from .tf_forms import FusedBatchNorm

DECAY, EPSILON, L2 = 0.997, 1e-5, 1e-4


class ConvBN(nn.Module):
    """slim.conv2d (no bias) with batch_norm; stride > 1 pads explicitly (symmetric for these
    kernels), as resnet_utils.conv2d_same does."""

    channels: int
    kernel: int
    stride: int = 1
    relu: bool = True
    decay: float = DECAY
    flax_batch_norm: bool = False

    @nn.compact
    def __call__(self, x):
        pad = (self.kernel - 1) // 2
        x = nn.Conv(self.channels, (self.kernel, self.kernel), (self.stride, self.stride),
                    padding=((pad, pad), (pad, pad)), use_bias=False, name="conv")(x)
        if self.flax_batch_norm:
            x = nn.BatchNorm(use_running_average=False, momentum=self.decay, epsilon=EPSILON, name="BatchNorm")(x)
        else:
            x = FusedBatchNorm(self.decay, EPSILON, name="BatchNorm")(x)
        return nn.relu(x) if self.relu else x


class Bottleneck(nn.Module):
    depth: int
    bottleneck: int
    stride: int
    options: dict

    @nn.compact
    def __call__(self, x):
        shortcut = ConvBN(self.depth, 1, self.stride, relu=False, name="shortcut", **self.options)(x)
        x = ConvBN(self.bottleneck, 1, name="conv1", **self.options)(x)
        x = ConvBN(self.bottleneck, 3, self.stride, name="conv2", **self.options)(x)
        x = ConvBN(self.depth, 1, relu=False, name="conv3", **self.options)(x)
        return nn.relu(shortcut + x)


class ResNetSmall(nn.Module):
    classes: int = 10
    symmetric_pool: bool = False
    options: dict = None

    @nn.compact
    def __call__(self, x):
        options = self.options or {}
        x = ConvBN(64, 7, 2, name="conv1", **options)(x)
        padding = ((1, 1), (1, 1)) if self.symmetric_pool else "SAME"
        x = nn.max_pool(x, (3, 3), strides=(2, 2), padding=padding)
        x = Bottleneck(32, 8, 2, options, name="block1")(x)
        x = Bottleneck(64, 16, 1, options, name="block2")(x)
        x = nn.Conv(self.classes, (1, 1), name="logits")(x.mean(axis=(1, 2), keepdims=True))
        return x.reshape(x.shape[0], -1)


def make(flax_batch_norm=False, symmetric_pool=False, decay=DECAY):
    model = ResNetSmall(symmetric_pool=symmetric_pool, options={"decay": decay, "flax_batch_norm": flax_batch_norm})
    variables = model.init(jax.random.key(0), jnp.zeros((1, 32, 32, 3), jnp.float32))
    tx = optax.inject_hyperparams(optax.sgd)(learning_rate=0.01, momentum=0.9)
    state = TrainState.create(apply_fn=model.apply, params=variables["params"], tx=tx,
                              batch_stats=variables["batch_stats"])

    @jax.jit
    def step(state, inputs):
        images, labels = inputs["IteratorGetNext:0"], inputs["IteratorGetNext:1"]

        def loss_fn(params):
            logits, updates = state.apply_fn({"params": params, "batch_stats": state.batch_stats}, images,
                                             mutable=["batch_stats"])
            kernels = [leaf for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]
                       if path[-1].key == "kernel"]
            regularization = sum(L2 * jnp.sum(k * k) / 2 for k in kernels)
            loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean() + regularization
            return loss, (updates, regularization)

        (loss, (updates, regularization)), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
        state = state.apply_gradients(grads=grads).replace(batch_stats=updates["batch_stats"])
        return state, {"loss": loss, "loss/regularization": regularization}

    # slim's scopes: resnet_small/block1/unit_1/bottleneck_v1/conv1/weights is params/block1/conv1/conv/kernel
    var_map = [(r"^resnet_small/(block\d)/unit_1/bottleneck_v1/(\w+)/weights:0$", r"params/\1/\2/conv/kernel"),
               (r"^resnet_small/(conv1)/weights:0$", r"params/\1/conv/kernel"),
               (r"^resnet_small/(block\d)/unit_1/bottleneck_v1/", r"\1/"),
               (r"^resnet_small/", "")]
    return state, step, {"var_map": var_map}
