"""What a team porting TF1 code to PyTorch writes once and reuses: TF's forms of the pieces whose
torch counterparts compute something slightly different.

- `TFAdam`: TF's Adam. torch.optim.Adam adds epsilon to the bias-corrected sqrt(v_hat); TF1's
  AdamOptimizer and Keras' Adam fold the bias correction into the step size and add epsilon to
  sqrt(v) ("epsilon hat"), so torch's epsilon acts as TF's times sqrt(1 - beta2^t).
- `TFAdamW`: tf.contrib.opt.AdamWOptimizer, TF's Adam after a decoupled decay not multiplied by
  the learning rate (torch.optim.AdamW multiplies it).
- `TFStartRMSprop`: torch's RMSprop with its mean squares starting at 1.0, as TF1's RMSPropOptimizer's
  do (torch's start at 0).
- `KerasBatchNorm1d`: Keras' BatchNormalization on (batch, features). torch's BatchNorm1d keeps
  the running variance of the batch with Bessel's correction (n / (n - 1)); Keras keeps the
  biased one, and moves its averages as `moving -= (moving - batch) * (1 - momentum)`.
"""

import math

import torch


class TFAdam(torch.optim.Optimizer):
    """Adam as TF computes it: lr_t = lr sqrt(1 - beta2^t) / (1 - beta1^t);
    var -= lr_t m / (sqrt(v) + epsilon). Its state is torch's names: step, exp_avg, exp_avg_sq."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-7):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = torch.tensor(0.0)
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                t = float(state["step"])
                lr_t = group["lr"] * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.add_((p.grad - m) * (1 - beta1))
                v.add_((p.grad * p.grad - v) * (1 - beta2))
                p.sub_(m * lr_t / (v.sqrt() + group["eps"]))


class TFAdamW(TFAdam):
    """tf.contrib.opt.AdamWOptimizer: TF's Adam after a decoupled weight decay of the variable by
    `weight_decay` itself, not times the learning rate (torch's AdamW multiplies it by lr)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, lr=lr, betas=betas, eps=eps)
        for group in self.param_groups:
            group["weight_decay"] = weight_decay

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.sub_(p * group["weight_decay"])
        super().step(closure)


class TFStartRMSprop(torch.optim.RMSprop):
    """torch.optim.RMSprop whose state starts as TF1's: the mean square at 1.0."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None and not self.state[p]:
                    state = self.state[p]
                    state["step"] = torch.tensor(0.0)
                    state["square_avg"] = torch.ones_like(p)
                    if group["momentum"] > 0:
                        state["momentum_buffer"] = torch.zeros_like(p)
                    if group["centered"]:
                        state["grad_avg"] = torch.zeros_like(p)
        return super().step(closure)


class KerasBatchNorm1d(torch.nn.BatchNorm1d):
    """BatchNorm1d with Keras' training-time arithmetic (torch's `momentum` is Keras' 1 - momentum)."""

    def forward(self, x):
        if not self.training:
            return super().forward(x)
        mean = x.mean(0)
        var = ((x - mean) ** 2).mean(0)
        with torch.no_grad():
            self.running_mean.sub_((self.running_mean - mean) * self.momentum)
            self.running_var.sub_((self.running_var - var) * self.momentum)
        inv = torch.rsqrt(var + self.eps) * self.weight
        return x * inv + (self.bias - mean * inv)
