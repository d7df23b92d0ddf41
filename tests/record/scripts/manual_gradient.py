"""A least-squares fit trained by a gradient written out by hand (no tf.gradients, no
optimizer): nothing in the graph says it trains. argv: --steps N. Knows nothing about tracekit."""
import argparse

import numpy as np
import tensorflow as tf

if hasattr(tf.compat.v1, "disable_eager_execution"):
    tf.compat.v1.disable_eager_execution()
parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=4)
args = parser.parse_args()
x = tf.compat.v1.placeholder(tf.float32, [8, 3], name="x")
y = tf.compat.v1.placeholder(tf.float32, [8, 1], name="y")
w = tf.compat.v1.get_variable("w", [3, 1], initializer=tf.compat.v1.zeros_initializer())
error = tf.matmul(x, w) - y
loss = tf.reduce_mean(tf.square(error), name="mse")
grad = tf.identity(2.0 / 8 * tf.matmul(x, error, transpose_a=True), name="grad_w")
rate = tf.constant(0.1, name="rate")
train = tf.group(tf.compat.v1.assign_sub(w, rate * grad), name="train")
rng = np.random.RandomState(0)
with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    for _ in range(args.steps):
        batch = rng.randn(8, 3).astype(np.float32)
        sess.run(train, {x: batch, y: batch.sum(axis=1, keepdims=True)})
print("trained", flush=True)
