"""The generated family of long training runs that holds the judged check to "a correct port
passes, a slip fails at its step": the runs' shapes, and the slip each one's wrong port makes.

Shared by the TF 1.15 recorder (tools/goldens/family.py), the TF2 ports (tools/ports/family.py)
and the driver (tools/family.py). No TensorFlow here, Python 3.7 syntax.

The axes are crossed so that every value of each meets several of the others: model (a ReLU,
tanh or GELU MLP, or a conv net with ReLU and 2x2 max-pooling), depth (weight layers, 2 to 5),
width (64 to 1024), optimizer (Adam, Momentum, RMSProp), batch (8 to 64), dropout (on or off)
and length (200 to 400 steps). Sizes are bounded (FEATURES inputs; the widest layers only in the
shallowest nets) so that a golden that keeps every step whole stays tens of MB.

Every golden's loss adds an L2 weight decay (DECAY x the sum of l2_loss over the kernels); Adam's
and RMSProp's learning rate decays exponentially at every step (RATE_HALVING), Momentum's is
constant (a Keras SGD port carries lr x accum, equivalent to TF1's accum under a constant rate
only). Each run's slip starts at a drawn step: "scale" multiplies one layer's kernel by 1 + 1e-3
after that step's update, "late" reads the learning rate schedule one step late from there
(Adam and RMSProp), "decay" leaves the weight decay out of the loss from there.

With a round-off emulation (tools/family.py --roundoff N), the golden's and the port's float32
ReLU pre-activations are each moved by a pseudo-random amount of up to N eps x the layer's
largest |pre-activation|, a function of the value itself with another salt on each side (no
random op, so nothing for the replay to feed): kernels that round N ulps apart, so that either
side's float32 puts elements near the kink on the other side, as another CPU's would. The
float64 port computes without it.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Any, Dict, List

FEATURES, CLASSES, IMAGE = 32, 10, 16
DECAY = 1e-4
RATE_HALVING = 200.0  # steps over which Adam's and RMSProp's learning rate halves
RATES = {"adam": 1e-3, "momentum": 0.01, "rmsprop": 1e-3}
MOMENTUM, RHO, RMS_EPSILON = 0.9, 0.9, 1e-10
SCALE = 1e-3
SLIPS = ("scale", "late", "decay")
MODELS = ("relu", "tanh", "gelu", "conv")
OPTIMIZERS = ("adam", "momentum", "rmsprop")
SIZE = 24
SALTS = {"golden": 12.9898, "port": 78.233}  # the round-off emulation's, one per side
EPS32 = 2.0 ** -23


@dataclass(frozen=True)
class Run:
    """One member of the family: its golden's shape and its wrong port's slip."""

    index: int
    model: str  # relu, tanh, gelu (MLPs) or conv
    depth: int  # weight layers: depth - 1 hidden (or conv blocks), then the logits
    width: int  # hidden units (a conv net: its channels are width // 16)
    optimizer: str
    batch: int
    dropout: float  # before the logits, 0: none
    steps: int
    seed: int
    slip: str
    slip_at: int
    slip_layer: int  # the hidden layer "scale" multiplies

    @property
    def name(self) -> str:
        return "%02d-%s-d%d-w%d-%s-b%d%s-%d" % (self.index, self.model, self.depth, self.width, self.optimizer,
                                                 self.batch, "-drop" if self.dropout else "", self.steps)

    @property
    def features(self) -> int:
        return FEATURES

    @property
    def channels(self) -> int:
        return max(self.width // 16, 4)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def family(size: int = SIZE, steps: int = 0) -> List[Run]:
    """The family's runs, the same on every machine; `steps` > 0 shortens every run to at most
    that many steps (the test suite's size), the slips drawn within them."""
    out = []
    for i in range(size):
        rng = random.Random(1000 + i)
        model = MODELS[i % len(MODELS)]
        depth = 2 + (i // 4 + i) % 4
        widths = [64, 128, 256, 512, 1024]
        width = widths[(i * 3) % len(widths)]
        while width * width * (depth - 2) > 70000 and model != "conv":  # keep a full golden small
            width //= 2
        optimizer = OPTIMIZERS[i % len(OPTIMIZERS)]
        batch = (8, 16, 32, 64)[(i // 2) % 4]
        dropout = 0.2 if (i // 3) % 2 else 0.0
        length = min((200, 300, 400)[(i // 5) % 3], steps) if steps else (200, 300, 400)[(i // 5) % 3]
        slips = [s for s in SLIPS if not (s == "late" and optimizer == "momentum")]
        slip = slips[rng.randrange(len(slips))]
        slip_at = rng.randrange(max(length // 10, 1), length)
        out.append(Run(i, model, depth, width, optimizer, batch, dropout, length, 1 + i, slip, slip_at,
                       rng.randrange(depth - 1)))
    return out


def by_name(runs: List[Run]) -> Dict[str, Run]:
    return {run.name: run for run in runs}
