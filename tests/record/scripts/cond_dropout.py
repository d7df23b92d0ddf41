"""Dropout inside a tf.cond on a training flag, as tflearn writes it (its draw is computed in the
branch, so session.run refuses to fetch it), in a finalized graph, trained by a plain Session loop
whose step 2 runs with the flag off (the branch not taken). argv: --steps N. Prints each step's
loss."""
import argparse

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=4)
args = parser.parse_args()
v1 = tf.compat.v1
v1.set_random_seed(3)
x = v1.placeholder(tf.float32, [8, 4], name="x")
y = v1.placeholder(tf.float32, [8, 1], name="y")
training = v1.placeholder(tf.bool, [], name="training")
h = v1.layers.dense(x, 16, activation=tf.nn.relu, kernel_initializer=v1.glorot_uniform_initializer(seed=1), name="h")
h = tf.cond(training, lambda: tf.nn.dropout(h, rate=0.5), lambda: h)
out = v1.layers.dense(h, 1, kernel_initializer=v1.glorot_uniform_initializer(seed=2), name="out")
loss = tf.reduce_mean(tf.square(out - y))
train = v1.train.AdamOptimizer(0.01).minimize(loss)
init = v1.global_variables_initializer()
v1.get_default_graph().finalize()
rng = np.random.RandomState(0)
with v1.Session() as sess:
    sess.run(init)
    for step in range(args.steps):
        value, _ = sess.run([loss, train], {x: rng.randn(8, 4), y: rng.randn(8, 1), training: step != 2})
        print("step loss %.9g" % value, flush=True)
