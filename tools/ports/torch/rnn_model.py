"""PyTorch port of the LSTM example (goldens/lstm_model.h5): a TF1 LSTMCell(6, forget_bias=1) under
dynamic_rnn and a dense head, trained with TF1's Adam (epsilon 1e-8), ported to an nn.LSTM and an
nn.Linear. The cell's weights convert with tracekit.torch.lstm (TF1's one kernel and gate order
i, j, f, o to torch's weight_ih, weight_hh and i, f, g, o; the forget bias TF1 adds at run time
held in torch's bias). TF1's cell has one bias: the port freezes torch's second, bias_hh, at 0.

`make()` returns (model, step, {"optimizer": ..., "convert": [...]}); cell="written" runs the
cell written out (an nn.LSTMCell's weights, its gates split in torch's order i, f, g, o) over the
sequence, as ports of custom cells do. Its other keyword arguments build deliberately wrong ports:
both_biases=True (torch's two biases both trained), forget_bias=0.0 (TF1's forget bias left out),
optimizer="torch" (torch.optim.Adam: epsilon after the bias correction), cell="written-tf1-split"
(the written cell splitting its gates as TF1's code does, i, j, f, o, on torch's layout).
"""

import torch
import torch.nn.functional as F

import tracekit
import tracekit.torch

from . import supervised_step
from .tf_forms import TFAdam

INPUTS, UNITS, CLASSES = 3, 6, 2


class WrittenCell(torch.nn.LSTMCell):
    """An LSTM cell written out on nn.LSTMCell's weights; split=TF1's order i, j, f, o is the slip."""

    def __init__(self, inputs, units, split="ifgo"):
        super().__init__(inputs, units)
        self.split = split

    def forward(self, x, state):
        h, c = state
        z = F.linear(x, self.weight_ih, self.bias_ih) + F.linear(h, self.weight_hh, self.bias_hh)
        gate = dict(zip(self.split, z.chunk(4, dim=1)))
        c = torch.sigmoid(gate["f"]) * c + torch.sigmoid(gate["i"]) * torch.tanh(gate["g"])
        return torch.sigmoid(gate["o"]) * torch.tanh(c), c


class Net(torch.nn.Module):
    def __init__(self, both_biases=False, cell="lstm"):
        super().__init__()
        if cell == "lstm":
            self.lstm = torch.nn.LSTM(INPUTS, UNITS, batch_first=True)
            bias_hh = self.lstm.bias_hh_l0
        else:
            self.lstm = WrittenCell(INPUTS, UNITS, "ifgo" if cell == "written" else "igfo")  # TF1's j is torch's g
            bias_hh = self.lstm.bias_hh
        if not both_biases:
            bias_hh.requires_grad_(False)
        self.dense = torch.nn.Linear(UNITS, CLASSES)

    def forward(self, x):
        if isinstance(self.lstm, torch.nn.LSTM):
            out, _ = self.lstm(x)
            last = out[:, -1]
        else:
            last = c = x.new_zeros(x.shape[0], UNITS)
            for t in range(x.shape[1]):
                last, c = self.lstm(x[:, t], (last, c))
        last = tracekit.tap("last_output", last)
        return tracekit.tap("logits", self.dense(last))


def make(both_biases=False, forget_bias=1.0, lr=1e-2, optimizer="tf", cell="lstm"):
    model = Net(both_biases, cell)
    adam = TFAdam if optimizer == "tf" else torch.optim.Adam
    optimizer = adam([p for p in model.parameters() if p.requires_grad], lr=lr, eps=1e-8)
    step = supervised_step(model, optimizer)
    convert = [tracekit.torch.lstm("rnn/lstm_cell", model.lstm, forget_bias=forget_bias)]
    return model, step, {"optimizer": optimizer, "convert": convert}
