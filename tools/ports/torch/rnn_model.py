"""PyTorch port of the LSTM example (goldens/lstm_model.h5): a TF1 LSTMCell(6, forget_bias=1) under
dynamic_rnn and a dense head, trained with TF1's Adam (epsilon 1e-8), ported to an nn.LSTM and an
nn.Linear. The cell's weights convert with tracekit.torch.lstm (TF1's one kernel and gate order
i, j, f, o to torch's weight_ih, weight_hh and i, f, g, o; the forget bias TF1 adds at run time
held in torch's bias). TF1's cell has one bias: the port freezes torch's second, bias_hh, at 0.

`make()` returns (model, step, {"optimizer": ..., "convert": [...]}); its keyword arguments build
deliberately wrong ports: both_biases=True (torch's two biases both trained), forget_bias=0.0
(TF1's forget bias left out), optimizer="torch" (torch.optim.Adam: epsilon after the bias
correction).
"""

import torch

import tracekit
import tracekit.torch

from . import supervised_step
from .tf_forms import TFAdam

INPUTS, UNITS, CLASSES = 3, 6, 2


class Net(torch.nn.Module):
    def __init__(self, both_biases=False):
        super().__init__()
        self.lstm = torch.nn.LSTM(INPUTS, UNITS, batch_first=True)
        if not both_biases:
            self.lstm.bias_hh_l0.requires_grad_(False)
        self.dense = torch.nn.Linear(UNITS, CLASSES)

    def forward(self, x):
        out, _ = self.lstm(x)
        last = tracekit.tap("last_output", out[:, -1])
        return tracekit.tap("logits", self.dense(last))


def make(both_biases=False, forget_bias=1.0, lr=1e-2, optimizer="tf"):
    model = Net(both_biases)
    adam = TFAdam if optimizer == "tf" else torch.optim.Adam
    optimizer = adam([p for p in model.parameters() if p.requires_grad], lr=lr, eps=1e-8)
    step = supervised_step(model, optimizer)
    convert = [tracekit.torch.lstm("rnn/lstm_cell", model.lstm, forget_bias=forget_bias)]
    return model, step, {"optimizer": optimizer, "convert": convert}
