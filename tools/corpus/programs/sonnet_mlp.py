"""dm-sonnet 1.36: an snt.nets.MLP classifier (snt modules, their own variable scopes and
initializers) trained by a tf.compat.v1 Session loop with feed_dict and tf.train.AdamOptimizer,
on synthetic data. argv: --steps N."""
import argparse

import numpy as np
import sonnet as snt
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=8)
args = parser.parse_args()
tf.compat.v1.set_random_seed(1)
x = tf.compat.v1.placeholder(tf.float32, [16, 6], name="x")
y = tf.compat.v1.placeholder(tf.int64, [16], name="y")
logits = snt.nets.MLP([8, 3], activation=tf.nn.relu, name="mlp")(x)
loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
train = tf.compat.v1.train.AdamOptimizer(0.01).minimize(loss)
rng = np.random.RandomState(0)
with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    for _ in range(args.steps):
        batch = rng.randn(16, 6).astype(np.float32)
        sess.run(train, {x: batch, y: (batch[:, 0] > 0).astype(np.int64) + (batch[:, 1] > 0)})
print("trained", flush=True)
