"""tensorflow-probability 0.8: a Bayesian classifier of tfp.layers.DenseReparameterization
(weights drawn from their posterior at every step, a KL divergence in the layer's losses)
trained by a tf.compat.v1 Session loop with Adam, on synthetic data. argv: --steps N."""
import argparse

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=8)
args = parser.parse_args()
tf.compat.v1.set_random_seed(2)
x = tf.compat.v1.placeholder(tf.float32, [16, 5], name="x")
y = tf.compat.v1.placeholder(tf.int64, [16], name="y")
layer = tfp.layers.DenseReparameterization(3, name="bayes")
logits = layer(x)
nll = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
loss = nll + tf.add_n(layer.losses) / 64.0  # the KL divergence, spread over a dataset of 64 rows
train = tf.compat.v1.train.AdamOptimizer(0.01).minimize(loss)
rng = np.random.RandomState(0)
with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    for _ in range(args.steps):
        batch = rng.randn(16, 5).astype(np.float32)
        sess.run(train, {x: batch, y: (batch[:, 0] > 0).astype(np.int64) + (batch[:, 1] > 0)})
print("trained", flush=True)
