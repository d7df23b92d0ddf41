"""tf.contrib.opt.AdamWOptimizer (TF 1.15): decoupled weight decay, applied by an assign_sub of
the variable itself ordered before the ApplyAdam of the same variable, both in the train op. The
update op alone does not make the variable's new value. argv: --steps N."""
import argparse

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
args = parser.parse_args()

x = tf.compat.v1.placeholder(tf.float32, [8, 4], name="x")
w = tf.compat.v1.get_variable("w", [4, 2], initializer=tf.compat.v1.glorot_uniform_initializer(seed=2))
loss = tf.reduce_mean(tf.square(tf.tanh(tf.matmul(x, w)) - 0.5))
train = tf.contrib.opt.AdamWOptimizer(weight_decay=0.01, learning_rate=0.01).minimize(loss)
rng = np.random.RandomState(0)
with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    for _ in range(args.steps):
        sess.run(train, {x: rng.randn(8, 4)})
print("trained", flush=True)
