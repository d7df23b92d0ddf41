"""A recurrent layer's gradients racing with a later layer's update: a tf.nn.dynamic_rnn (a
while loop forward and backward) under a dense head, trained by ungated tf.gradients then
apply_gradients. The head's kernel is read where the backward pass enters the loop, ordered
against nothing in the kernel's own update, and the RNN's gradients leave the backward loop
only through its next iteration's Merge. --ordered: the updates wait for every gradient.
Prints each step's loss."""

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
v1.set_random_seed(1)
x = v1.placeholder(tf.float32, [8, 5, 3], name="x")
y = v1.placeholder(tf.float32, [8, 5, 1], name="y")
outputs, _ = v1.nn.dynamic_rnn(v1.nn.rnn_cell.BasicRNNCell(16), x, dtype=tf.float32)
out = v1.layers.dense(outputs, 1, name="head")
loss = tf.reduce_mean(tf.square(out - y))
params = v1.trainable_variables()
grads = tf.gradients(loss, params)
opt = v1.train.GradientDescentOptimizer(0.5)
if args.ordered:
    with tf.control_dependencies(grads):
        train = opt.apply_gradients(zip(grads, params))
else:
    train = opt.apply_gradients(zip(grads, params))
rng = np.random.RandomState(0)
with v1.Session() as sess:
    sess.run(v1.global_variables_initializer())
    for k in range(args.steps):
        value, _ = sess.run([loss, train], {x: rng.randn(8, 5, 3), y: rng.randn(8, 5, 1)})
        print("step %d loss %.7f" % (k, value), flush=True)
