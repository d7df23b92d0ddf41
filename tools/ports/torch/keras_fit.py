"""PyTorch port of the TF1 Keras fit example (goldens/keras_fit.h5): Dense, BatchNormalization,
ReLU, Dropout, Dense under Keras' Adam, with a softmax cross-entropy on one-hot labels.

Keras' defaults written out in torch's terms: BatchNormalization's momentum 0.99 is torch's
0.01, its epsilon 1e-3; Keras' Adam epsilon 1e-7. `make()` returns (model, step, {"optimizer":
optimizer}); its keyword arguments build deliberately wrong ports: optimizer="torch"
(torch.optim.Adam, epsilon after the bias correction), batch_norm="torch" (nn.BatchNorm1d, the
running variance with Bessel's correction), bn_momentum=0.99 (Keras' number given to torch),
dropout=0.5, weight_decay=0.01 with optimizer="torch" (an L2 term torch's Adam adds to the
gradient inside its step), bn_eps=1e-5 (torch's BatchNorm default).
"""

import torch

from . import supervised_step
from .tf_forms import KerasBatchNorm1d, TFAdam

FEATURES, CLASSES = 5, 3


class Net(torch.nn.Module):
    def __init__(self, batch_norm="keras", bn_momentum=0.01, bn_eps=1e-3, dropout=0.25):
        super().__init__()
        norm = KerasBatchNorm1d if batch_norm == "keras" else torch.nn.BatchNorm1d
        self.hidden = torch.nn.Linear(FEATURES, 16)
        self.bn = norm(16, momentum=bn_momentum, eps=bn_eps)
        self.dropout = torch.nn.Dropout(dropout)
        self.logits = torch.nn.Linear(16, CLASSES)

    def forward(self, x):
        return self.logits(self.dropout(torch.relu(self.bn(self.hidden(x)))))


def make(optimizer="tf", batch_norm="keras", epsilon=1e-7, bn_momentum=0.01, dropout=0.25, lr=1e-2,
         weight_decay=0.0, bn_eps=1e-3):
    model = Net(batch_norm, bn_momentum, bn_eps, dropout)
    if optimizer == "tf":
        opt = TFAdam(model.parameters(), lr=lr, eps=epsilon)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=lr, eps=epsilon, weight_decay=weight_decay)
    step = supervised_step(model, opt, x="hidden_input:0", y="logits_target:0")
    return model, step, {"optimizer": opt}


def make_with_torch_adam():
    """The port with torch.optim.Adam (a factory for `tracekit check GOLDEN MODULE:FUNCTION`)."""
    return make(optimizer="torch")
