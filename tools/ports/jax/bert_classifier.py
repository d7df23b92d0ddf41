"""flax port of the corpus' google-research/bert classifier (tools/corpus/programs/bert_classifier.py),
written as teams port BERT to flax: modules named as Hugging Face's FlaxBertModel names them
(`bert/encoder/layer/0/attention/self/query`, `LayerNorm`), nn.Embed for the three embeddings,
BERT's tanh GELU, dropout 0.1 where BERT has it, the classifier an nn.Dense, and BERT's
AdamWeightDecayOptimizer as an optax chain: the gradients clipped to a global norm of 1.0, Adam
without bias correction (`scale_by_bert_adam`, written out: optax's Adam always corrects), the
weight decay added under a mask that leaves LayerNorm weights and biases undecayed, as BERT's
exclusion list does, then the rate, BERT's polynomial decay to 0, an optax schedule exposed by
inject_hyperparams. The train state's step is TF1's global_step.

make(slip=None, **sizes) -> (state, step, {"var_map": ...}); `slip` makes a wrong port: "adamw"
(optax.adamw in the chain in place of BERT's Adam: bias-corrected, epsilon after the correction)
or "decay-all" (no mask: the decay on LayerNorm weights and biases too).
"""

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import linen as nn

import tracekit.jax

from . import TrainState

SIZES = dict(hidden=32, heads=2, layers=2, intermediate=64, vocab=64, seq=16, positions=None, lr=1e-3)
LABELS, TYPES = 3, 16
TRAIN_STEPS = 1_000_000_000  # the corpus driver's --train-steps
NO_DECAY = ("bias", "LayerNorm")


class SelfAttention(nn.Module):
    heads: int

    @nn.compact
    def __call__(self, x, adder, train):
        batch, seq, hidden = x.shape

        def split(t):
            return t.reshape(batch, seq, self.heads, hidden // self.heads).transpose(0, 2, 1, 3)
        query, key, value = (split(nn.Dense(hidden, name=name)(x)) for name in ("query", "key", "value"))
        scores = query @ key.transpose(0, 1, 3, 2) / math.sqrt(hidden // self.heads)
        probs = nn.Dropout(0.1, deterministic=not train)(jax.nn.softmax(scores + adder, axis=-1))
        return (probs @ value).transpose(0, 2, 1, 3).reshape(batch, seq, hidden)


class Output(nn.Module):
    """Dense, dropout, then LayerNorm of the sum with what came in."""

    @nn.compact
    def __call__(self, x, residual, train):
        x = nn.Dropout(0.1, deterministic=not train)(nn.Dense(residual.shape[-1], name="dense")(x))
        return nn.LayerNorm(epsilon=1e-12, name="LayerNorm")(x + residual)


class Attention(nn.Module):
    heads: int

    @nn.compact
    def __call__(self, x, adder, train):
        return Output(name="output")(SelfAttention(self.heads, name="self")(x, adder, train), x, train)


class Intermediate(nn.Module):
    size: int

    @nn.compact
    def __call__(self, x):
        return nn.gelu(nn.Dense(self.size, name="dense")(x), approximate=True)  # BERT's gelu: the tanh form


class Layer(nn.Module):
    heads: int
    intermediate: int

    @nn.compact
    def __call__(self, x, adder, train):
        attended = Attention(self.heads, name="attention")(x, adder, train)
        return Output(name="output")(Intermediate(self.intermediate, name="intermediate")(attended), attended, train)


class Embeddings(nn.Module):
    vocab: int
    hidden: int
    positions: int

    @nn.compact
    def __call__(self, ids, segments, train):
        seq = ids.shape[1]
        x = nn.Embed(self.vocab, self.hidden, name="word_embeddings")(ids)
        x = x + nn.Embed(TYPES, self.hidden, name="token_type_embeddings")(segments)
        x = x + nn.Embed(self.positions, self.hidden, name="position_embeddings")(jnp.arange(seq))[None]
        return nn.Dropout(0.1, deterministic=not train)(nn.LayerNorm(epsilon=1e-12, name="LayerNorm")(x))


class Layers(nn.Module):
    """The encoder's layers, named by their index (FlaxBertLayerCollection's `layer/0`, ...)."""

    layers: int
    heads: int
    intermediate: int

    @nn.compact
    def __call__(self, x, adder, train):
        for i in range(self.layers):
            x = Layer(self.heads, self.intermediate, name=str(i))(x, adder, train)
        return x


class Encoder(nn.Module):
    size: Any

    @nn.compact
    def __call__(self, x, adder, train):
        return Layers(self.size["layers"], self.size["heads"], self.size["intermediate"], name="layer")(x, adder, train)


class Bert(nn.Module):
    size: Any

    @nn.compact
    def __call__(self, ids, mask, segments, train):
        size, hidden = self.size, self.size["hidden"]
        x = Embeddings(size["vocab"], hidden, size["positions"] or size["seq"], name="embeddings")(ids, segments, train)
        adder = (1.0 - mask[:, None, None, :].astype(jnp.float32)) * -10000.0
        x = Encoder(size, name="encoder")(x, adder, train)
        return jnp.tanh(Pooler(hidden, name="pooler")(x[:, 0]))


class Pooler(nn.Module):
    hidden: int

    @nn.compact
    def __call__(self, x):
        return nn.Dense(self.hidden, name="dense")(x)


class Classifier(nn.Module):
    size: Any

    @nn.compact
    def __call__(self, ids, mask, segments, train):
        pooled = Bert(self.size, name="bert")(ids, mask, segments, train)
        return nn.Dense(LABELS, name="classifier")(nn.Dropout(0.1, deterministic=not train)(pooled))


class BertAdamState(NamedTuple):
    mu: Any
    nu: Any


def scale_by_bert_adam(b1=0.9, b2=0.999, eps=1e-6):
    """BERT's Adam: m and v without bias correction, epsilon added to sqrt(v)."""
    def init(params):
        return BertAdamState(jax.tree_util.tree_map(jnp.zeros_like, params),
                             jax.tree_util.tree_map(jnp.zeros_like, params))

    def update(updates, state, params=None):
        mu = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, state.mu, updates)
        nu = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, state.nu, updates)
        return jax.tree_util.tree_map(lambda m, v: m / (jnp.sqrt(v) + eps), mu, nu), BertAdamState(mu, nu)
    return optax.GradientTransformation(init, update)


def decay_mask(params):
    """True where BERT decays: every weight but the LayerNorm ones and the biases."""
    return jax.tree_util.tree_map_with_path(
        lambda path, _: not any(word in jax.tree_util.keystr(path) for word in NO_DECAY), params)


def make(slip=None, train_steps=TRAIN_STEPS, clip_in_step=False, **sizes):
    """clip_in_step: the step clips the gradients by their global norm itself, as TF1's
    clip_by_global_norm computes it, before it hands them to tx (no clip in the chain)."""
    size = dict(SIZES, **sizes)
    seq = size["seq"]
    mask = None if slip == "decay-all" else decay_mask
    clip = () if clip_in_step else (optax.clip_by_global_norm(1.0),)

    def optimizer(learning_rate):
        if slip == "adamw":
            return optax.chain(*clip, optax.adamw(learning_rate, eps=1e-6, weight_decay=0.01, mask=mask))
        return optax.chain(*clip, scale_by_bert_adam(), optax.add_decayed_weights(0.01, mask),
                           optax.scale_by_learning_rate(learning_rate))

    # BERT's polynomial decay (power 1) to 0 over the train steps
    schedule = optax.linear_schedule(size["lr"], 0.0, train_steps)
    tx = optax.inject_hyperparams(optimizer)(learning_rate=schedule)
    model = Classifier(size)
    blank = jnp.zeros((1, seq), jnp.int32)
    params = model.init(jax.random.key(0), blank, blank, blank, train=False)["params"]
    state = TrainState.create(apply_fn=model.apply, params=params, tx=tx, key=jax.random.key(1))

    @jax.jit
    def step(state, inputs):
        key = jax.random.fold_in(state.key, state.step)

        def loss_fn(params):
            logits = state.apply_fn({"params": params}, inputs["input_ids:0"], inputs["input_mask:0"],
                                    inputs["segment_ids:0"], train=True, rngs={"dropout": key})
            return optax.softmax_cross_entropy_with_integer_labels(logits, inputs["label_ids:0"]).mean()
        loss, grads = jax.value_and_grad(loss_fn)(state.params)
        if clip_in_step:  # tf.clip_by_global_norm: t * clip_norm / max(global_norm, clip_norm)
            norm = optax.tree.norm(grads)
            grads = jax.tree_util.tree_map(lambda g: g * 1.0 / jnp.maximum(norm, 1.0), grads)
        return state.apply_gradients(grads=grads), loss

    # FlaxBertModel's names against BERT's scopes: the layers' index, the classifier (TF1's
    # output_weights is (labels, hidden), a Dense kernel (hidden, labels))
    var_map = [(r"^bert/encoder/layer_(\d+)/", r"bert/encoder/layer/\1/"),
               (r"^bert/embeddings/(\w+_embeddings):0$", r"params/bert/embeddings/\1/embedding"),
               (r"^output_weights:0$", tracekit.jax.transpose("output_weights:0", "params/classifier/kernel")),
               (r"^output_bias:0$", "params/classifier/bias")]
    return state, step, {"var_map": var_map}


def make_decay_all():
    """The port with the "decay-all" slip (a factory for localize and `tracekit check GOLDEN MODULE:FUNCTION`)."""
    return make(slip="decay-all")
