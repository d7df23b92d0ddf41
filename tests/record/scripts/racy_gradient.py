"""A TF1 trainer whose gradients race with its own updates: tf.gradients (ungated) then
apply_gradients, so the backward pass's read of the second layer's kernel (for the first layer's
gradient) is ordered against nothing in the kernel's own update, which needs only its own
gradient. On ref variables the read may come after the update: the first layer's gradient is then
taken from a kernel the step already moved. The pattern of gradient checkpointing's copies of the
forward pass, ordered only after the loss. --ordered: the updates wait for every gradient (the
fix). Prints each step's loss."""

import argparse

import numpy as np
import tensorflow as tf

if hasattr(tf.compat.v1, "disable_eager_execution"):
    tf.compat.v1.disable_eager_execution()

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--ordered", action="store_true")
args = parser.parse_args()
v1 = tf.compat.v1

x = v1.placeholder(tf.float32, [64, 32], name="x")
y = v1.placeholder(tf.float32, [64, 1], name="y")
h = v1.layers.dense(x, 256, activation=tf.tanh, kernel_initializer=v1.glorot_uniform_initializer(seed=1), name="h1")
h = v1.layers.dense(h, 256, activation=tf.tanh, kernel_initializer=v1.glorot_uniform_initializer(seed=2), name="h2")
out = v1.layers.dense(h, 1, kernel_initializer=v1.glorot_uniform_initializer(seed=3), name="out")
loss = tf.reduce_mean(tf.square(out - y))
params = v1.trainable_variables()
grads = tf.gradients(loss, params)
opt = v1.train.GradientDescentOptimizer(0.05)
if args.ordered:
    with tf.control_dependencies(grads):
        train = opt.apply_gradients(zip(grads, params))
else:
    train = opt.apply_gradients(zip(grads, params))

rng = np.random.RandomState(0)
with v1.Session() as sess:
    sess.run(v1.global_variables_initializer())
    for k in range(args.steps):
        value, _ = sess.run([loss, train], {x: rng.randn(64, 32), y: rng.randn(64, 1)})
        print("step %d loss %.7f" % (k, value), flush=True)
