"""Gradients made otherwise than by tf.gradients' own rules, as TF1 code does it: --mode custom,
a tf.custom_gradient that halves the gradient flowing back through a block (a gradient-scaling
layer); --mode override, an Identity whose gradient gradient_override_map replaces by a clipped
one; --mode patched, tf.gradients monkey-patched by a module's own function (which calls the
original with gate_gradients, as gradient-checkpointing modules install themselves). Trained
by tf.gradients + Adam's apply_gradients. argv: --mode M --steps N. Prints each step's loss."""

import argparse

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--mode", choices=["custom", "override", "patched"], required=True)
parser.add_argument("--steps", type=int, default=3)
args = parser.parse_args()
v1 = tf.compat.v1
x = v1.placeholder(tf.float32, [8, 4], name="x")
y = v1.placeholder(tf.float32, [8, 1], name="y")


@tf.custom_gradient
def half_gradient(h):
    return tf.identity(h), lambda dy: 0.5 * dy


@tf.RegisterGradient("ClippedIdentity")
def _clipped_identity(op, grad):
    return tf.clip_by_value(grad, -1e-3, 1e-3)


if args.mode == "patched":
    original = tf.gradients

    def gated_gradients(ys, xs, **kwargs):  # what a module installs in place of tf.gradients
        return original(ys, xs, gate_gradients=True, **kwargs)
    tf.__dict__["gradients"] = gated_gradients

h = v1.layers.dense(x, 6, activation=tf.tanh, name="h1", kernel_initializer=v1.glorot_uniform_initializer(seed=1))
if args.mode == "custom":
    h = half_gradient(h)
elif args.mode == "override":
    with v1.get_default_graph().gradient_override_map({"Identity": "ClippedIdentity"}):
        h = tf.identity(h)
h = v1.layers.dense(h, 6, activation=tf.tanh, name="h2", kernel_initializer=v1.glorot_uniform_initializer(seed=2))
out = v1.layers.dense(h, 1, name="out", kernel_initializer=v1.glorot_uniform_initializer(seed=3))
loss = tf.reduce_mean(tf.square(out - y))
params = v1.trainable_variables()
grads = tf.gradients(loss, params)
with tf.control_dependencies(grads):
    train = v1.train.AdamOptimizer(0.01).apply_gradients(zip(grads, params))
rng = np.random.RandomState(0)
with v1.Session() as sess:
    sess.run(v1.global_variables_initializer())
    for _ in range(args.steps):
        value, _ = sess.run([loss, train], {x: rng.randn(8, 4), y: rng.randn(8, 1)})
        print("step loss %.9g" % value, flush=True)
