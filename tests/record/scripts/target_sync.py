"""A DQN-style loop: the loss reads a target network that a separate run copies from the online
network every few steps, and a counter the script advances by a run of its own. The state a
step starts from is then not the state the previous step ended with. Prints, after each sync,
the target network's first kernel sum, and each step's loss."""

import argparse

import numpy as np
import tensorflow as tf

tf.compat.v1.disable_eager_execution()

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=9)
parser.add_argument("--sync", type=int, default=4)
args = parser.parse_args()

x = tf.compat.v1.placeholder(tf.float32, [8, 4], name="x")
init = tf.compat.v1.glorot_uniform_initializer(seed=9)


def net(scope, trainable):
    with tf.compat.v1.variable_scope(scope):
        h = tf.compat.v1.layers.dense(x, 16, tf.nn.tanh, kernel_initializer=init, name="h", trainable=trainable)
        return tf.compat.v1.layers.dense(h, 2, kernel_initializer=init, name="q", trainable=trainable)


online, target = net("online", True), net("target", False)
loss = tf.reduce_mean(tf.square(online - (1.0 + 0.9 * tf.stop_gradient(target))))
train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
online_vars = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES, "online")
target_vars = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES, "target")
sync = tf.group(*[t.assign(o) for o, t in zip(online_vars, target_vars)])
episodes = tf.compat.v1.get_variable("episodes", [], tf.int64, tf.compat.v1.zeros_initializer(), trainable=False)
count = episodes.assign_add(1)

rng = np.random.RandomState(1)
with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    for k in range(args.steps):
        if k % args.sync == 1:
            sess.run(sync)
            sess.run(count)
        value, _ = sess.run([loss, train], {x: rng.randn(8, 4)})
        print("step %d loss %.7f" % (k, value))
