"""PyTorch port of the corpus' google-research/bert classifier (tools/corpus/programs/bert_classifier.py),
written as teams port BERT to PyTorch: modules named as Hugging Face's BertModel names them
(`bert.encoder.layer.0.attention.self.query`, `LayerNorm`), nn.Embedding for the three
embeddings, BERT's tanh GELU, dropout 0.1 where BERT has it, the classifier an nn.Linear, the
gradients clipped by clip_grad_norm_ to 1.0, and BERT's AdamWeightDecayOptimizer as a
torch.optim.Optimizer subclass (no bias correction; the decay added to the step, both scaled by
the rate) over two parameter groups, the LayerNorm weights and biases undecayed as BERT's
exclusion list has them. The rate is BERT's polynomial decay to 0 over the run's train steps,
set on the groups before each step from a step count the model keeps (a buffer that pairs with
TF1's global_step, so a step started from the golden's state runs at the golden's count).

make(slip=None, **sizes) -> (model, step, {"optimizer": ..., "var_map": ...}); `slip` makes a wrong
port: "adamw" (torch.optim.AdamW in place of BERT's optimizer: bias-corrected, epsilon after
the correction) or "decay-all" (one parameter group: the decay on LayerNorm weights and biases too).
"""

import math

import torch
import torch.nn.functional as F

import tracekit.torch

SIZES = dict(hidden=32, heads=2, layers=2, intermediate=64, vocab=64, seq=16, positions=None, lr=1e-3)
LABELS, TYPES = 3, 16
TRAIN_STEPS = 1_000_000_000  # the corpus driver's --train-steps
NO_DECAY = ("bias", "LayerNorm.weight")  # as Hugging Face's fine-tuning scripts list BERT's exclusions


class SelfAttention(torch.nn.Module):
    def __init__(self, hidden, heads, sdpa=False):
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.query, self.key, self.value = (torch.nn.Linear(hidden, hidden) for _ in range(3))
        self.dropout = torch.nn.Dropout(0.1)

    def forward(self, x, adder):
        batch, seq, hidden = x.shape

        def split(t):
            return t.view(batch, seq, self.heads, hidden // self.heads).transpose(1, 2)
        query, key, value = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.sdpa:  # torch's fused attention, its dropout given as dropout_p
            context = F.scaled_dot_product_attention(query, key, value, attn_mask=adder,
                                                     dropout_p=0.1 if self.training else 0.0)
        else:
            scores = query @ key.transpose(-1, -2) / math.sqrt(hidden // self.heads)
            context = self.dropout(torch.softmax(scores + adder, dim=-1)) @ value
        return context.transpose(1, 2).reshape(batch, seq, hidden)


class Output(torch.nn.Module):
    """Dense, dropout, then LayerNorm of the sum with what came in."""

    def __init__(self, inner, hidden):
        super().__init__()
        self.dense = torch.nn.Linear(inner, hidden)
        self.dropout = torch.nn.Dropout(0.1)
        self.LayerNorm = torch.nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x, residual):
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class Attention(torch.nn.Module):
    def __init__(self, hidden, heads, sdpa):
        super().__init__()
        self.self = SelfAttention(hidden, heads, sdpa)
        self.output = Output(hidden, hidden)

    def forward(self, x, adder):
        return self.output(self.self(x, adder), x)


class Intermediate(torch.nn.Module):
    def __init__(self, hidden, inner):
        super().__init__()
        self.dense = torch.nn.Linear(hidden, inner)

    def forward(self, x):
        return F.gelu(self.dense(x), approximate="tanh")  # BERT's gelu is the tanh approximation


class Layer(torch.nn.Module):
    def __init__(self, hidden, heads, inner, sdpa):
        super().__init__()
        self.attention = Attention(hidden, heads, sdpa)
        self.intermediate = Intermediate(hidden, inner)
        self.output = Output(inner, hidden)

    def forward(self, x, adder):
        attended = self.attention(x, adder)
        return self.output(self.intermediate(attended), attended)


class Embeddings(torch.nn.Module):
    def __init__(self, vocab, hidden, positions):
        super().__init__()
        self.word_embeddings = torch.nn.Embedding(vocab, hidden)
        self.position_embeddings = torch.nn.Embedding(positions, hidden)
        self.token_type_embeddings = torch.nn.Embedding(TYPES, hidden)
        self.LayerNorm = torch.nn.LayerNorm(hidden, eps=1e-12)
        self.dropout = torch.nn.Dropout(0.1)

    def forward(self, ids, segments):
        x = self.word_embeddings(ids) + self.token_type_embeddings(segments)
        x = x + self.position_embeddings.weight[None, :ids.shape[1]]
        return self.dropout(self.LayerNorm(x))


class Bert(torch.nn.Module):
    def __init__(self, size, sdpa=False):
        super().__init__()
        hidden = size["hidden"]
        self.embeddings = Embeddings(size["vocab"], hidden, size["positions"] or size["seq"])
        self.encoder = torch.nn.Module()
        self.encoder.layer = torch.nn.ModuleList(Layer(hidden, size["heads"], size["intermediate"], sdpa)
                                                 for _ in range(size["layers"]))
        self.pooler = torch.nn.Module()
        self.pooler.dense = torch.nn.Linear(hidden, hidden)

    def forward(self, ids, mask, segments):
        x = self.embeddings(ids, segments)
        adder = (1.0 - mask[:, None, None, :].float()) * -10000.0
        for layer in self.encoder.layer:
            x = layer(x, adder)
        return torch.tanh(self.pooler.dense(x[:, 0]))


class Classifier(torch.nn.Module):
    def __init__(self, size, sdpa=False):
        super().__init__()
        self.bert = Bert(size, sdpa)
        self.dropout = torch.nn.Dropout(0.1)
        self.classifier = torch.nn.Linear(size["hidden"], LABELS)
        # TF1's global_step: the step count the rate's schedule reads, kept where the replay pairs it
        self.register_buffer("global_step", torch.zeros((), dtype=torch.int64))

    def forward(self, ids, mask, segments):
        return self.classifier(self.dropout(self.bert(ids, mask, segments)))


class AdamWeightDecay(torch.optim.Optimizer):
    """BERT's AdamWeightDecayOptimizer: m and v without bias correction, epsilon added to
    sqrt(v), the group's weight decay times the parameter added to the step, all times the rate."""

    def __init__(self, params, lr=1e-3, weight_decay=0.01, betas=(0.9, 0.999), eps=1e-6):
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, betas=betas, eps=eps))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["m"] = torch.zeros_like(p)
                    state["v"] = torch.zeros_like(p)
                m, v = state["m"], state["v"]
                m.mul_(beta1).add_(p.grad, alpha=1.0 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1.0 - beta2)
                update = m / (v.sqrt() + group["eps"])
                if group["weight_decay"]:
                    update += group["weight_decay"] * p
                p.add_(update, alpha=-group["lr"])


def make(slip=None, train_steps=TRAIN_STEPS, sdpa=False, **sizes):
    """sdpa: the attention by torch.nn.functional.scaled_dot_product_attention, its dropout as dropout_p."""
    size = dict(SIZES, **sizes)
    model = Classifier(size, sdpa)
    named = list(model.named_parameters())
    if slip == "decay-all":
        groups = [{"params": [p for _, p in named], "weight_decay": 0.01}]
    else:
        groups = [{"params": [p for n, p in named if not any(word in n for word in NO_DECAY)], "weight_decay": 0.01},
                  {"params": [p for n, p in named if any(word in n for word in NO_DECAY)], "weight_decay": 0.0}]
    if slip == "adamw":
        optimizer = torch.optim.AdamW(groups, lr=size["lr"], eps=1e-6)
    else:
        optimizer = AdamWeightDecay(groups, lr=size["lr"])
    peak = size["lr"]

    def step(inputs):
        done = min(int(model.global_step), train_steps) / train_steps
        for group in optimizer.param_groups:  # BERT's polynomial decay (power 1) to 0
            group["lr"] = peak * (1.0 - done)
        optimizer.zero_grad()
        logits = model(inputs["input_ids:0"].long(), inputs["input_mask:0"], inputs["segment_ids:0"].long())
        loss = F.cross_entropy(logits, inputs["label_ids:0"].long())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        with torch.no_grad():
            model.global_step += 1
        return {"loss": loss, "lr": torch.tensor(peak * (1.0 - done))}

    # Hugging Face's names against BERT's scopes: the layers' index, the embeddings' tables, the
    # classifier (TF1's output_weights is (labels, hidden), an nn.Linear's weight as it is)
    var_map = [(r"^bert/encoder/layer_(\d+)/", r"bert/encoder/layer/\1/"),
               (r"^bert/embeddings/(\w+_embeddings):0$", r"bert.embeddings.\1.weight"),
               (r"^output_weights:0$", tracekit.torch.transpose("output_weights:0", model.classifier.weight)),
               (r"^output_bias:0$", "classifier.bias")]
    return model, step, {"optimizer": optimizer, "var_map": var_map}


def make_decay_all():
    """The port with the "decay-all" slip (a factory for localize and `tracekit check GOLDEN MODULE:FUNCTION`)."""
    return make(slip="decay-all")
