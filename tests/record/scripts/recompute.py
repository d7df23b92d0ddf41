"""Gradient checkpointing with tf.contrib.layers.recompute_grad (TF 1.15): a block of two dense
layers whose forward pass is recomputed in the backward pass, on resource variables, trained by
Adam. Its custom gradient rebuilds the block's layers through the variable scopes of the graph
it runs in. argv: --steps N. Prints each step's loss."""

import argparse

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
args = parser.parse_args()
v1 = tf.compat.v1
x = v1.placeholder(tf.float32, [8, 4], name="x")
y = v1.placeholder(tf.float32, [8, 1], name="y")


@tf.contrib.layers.recompute_grad
def block(h):
    h = v1.layers.dense(h, 6, activation=tf.tanh, name="b1", kernel_initializer=v1.glorot_uniform_initializer(seed=1))
    return v1.layers.dense(h, 6, activation=tf.tanh, name="b2", kernel_initializer=v1.glorot_uniform_initializer(seed=2))


with v1.variable_scope("net", use_resource=True):
    h = v1.layers.dense(x, 6, activation=tf.tanh, name="in", kernel_initializer=v1.glorot_uniform_initializer(seed=3))
    h = block(h)
    out = v1.layers.dense(h, 1, name="out", kernel_initializer=v1.glorot_uniform_initializer(seed=4))
loss = tf.reduce_mean(tf.square(out - y))
train = v1.train.AdamOptimizer(0.01).minimize(loss)
rng = np.random.RandomState(0)
with v1.Session() as sess:
    sess.run(v1.global_variables_initializer())
    for k in range(args.steps):
        value, _ = sess.run([loss, train], {x: rng.randn(8, 4), y: rng.randn(8, 1)})
        print("step %d loss %.5f" % (k, value), flush=True)
