"""A TF1 trainer whose fetched loss adds an L2 term of the weights it trains, with Adam and
gate_gradients off: nothing orders the L2 term's reads of the kernels against their updates in
the same run, so the loss the script fetches may be taken after the update. Prints each step's
loss as fetched."""

import argparse

import numpy as np
import tensorflow as tf

tf.compat.v1.disable_eager_execution()

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=4)
args = parser.parse_args()

x = tf.compat.v1.placeholder(tf.float32, [16, 8], name="x")
y = tf.compat.v1.placeholder(tf.int32, [16], name="y")
init = tf.compat.v1.glorot_uniform_initializer(seed=5)
hidden = tf.compat.v1.layers.dense(x, 32, tf.nn.relu, kernel_initializer=init, name="hidden")
logits = tf.compat.v1.layers.dense(hidden, 4, kernel_initializer=init, name="logits")
data_loss = tf.reduce_mean(tf.compat.v1.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
kernels = [v for v in tf.compat.v1.trainable_variables() if "kernel" in v.name]
loss = data_loss + 1e-2 * tf.add_n([tf.nn.l2_loss(k) for k in kernels])
train = tf.compat.v1.train.AdamOptimizer(1e-2).minimize(loss, gate_gradients=tf.compat.v1.train.Optimizer.GATE_NONE)

rng = np.random.RandomState(0)
with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    for k in range(args.steps):
        value, _ = sess.run([loss, train], {x: rng.randn(16, 8), y: rng.randint(0, 4, 16)})
        print("step %d loss %.7f" % (k, value))
