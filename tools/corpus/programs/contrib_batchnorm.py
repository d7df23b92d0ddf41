"""TensorFlow 1.15's tf.contrib.layers and tf.compat.v1.layers: a classifier whose hidden layers
are contrib's fully_connected normalized by contrib's batch_norm and tf.layers'
batch_normalization (their moving averages updated by the ops they put in UPDATE_OPS), trained by
tf.contrib.layers.optimize_loss (which runs UPDATE_OPS before the update, clips the gradients'
global norm and decays the learning rate by its learning_rate_decay_fn) under momentum SGD, in a
plain Session loop that feeds numpy batches and prints the loss optimize_loss returns.
argv: --steps N."""
import argparse

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
args = parser.parse_args()
rng = np.random.RandomState(0)
data = rng.randn(64, 5).astype(np.float32)
labels = (data[:, 0] - data[:, 1] > 0).astype(np.int64)
tf.compat.v1.set_random_seed(1)
x = tf.compat.v1.placeholder(tf.float32, [None, 5], name="x")
y = tf.compat.v1.placeholder(tf.int64, [None], name="y")
net = tf.contrib.layers.fully_connected(x, 8, normalizer_fn=tf.contrib.layers.batch_norm,
                                        normalizer_params={"is_training": True, "decay": 0.9}, scope="fc1")
net = tf.compat.v1.layers.dense(net, 8, use_bias=False, name="fc2")
net = tf.nn.relu(tf.compat.v1.layers.batch_normalization(net, momentum=0.9, training=True, name="bn2"))
logits = tf.contrib.layers.fully_connected(net, 2, activation_fn=None, scope="logits")
loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(y, logits)
global_step = tf.compat.v1.train.get_or_create_global_step()
train = tf.contrib.layers.optimize_loss(
    loss, global_step, learning_rate=0.1, optimizer=lambda lr: tf.compat.v1.train.MomentumOptimizer(lr, 0.9),
    clip_gradients=1.0, summaries=["loss"],
    learning_rate_decay_fn=lambda lr, step: tf.compat.v1.train.exponential_decay(lr, step, 2, 0.5))
with tf.compat.v1.Session() as session:
    session.run(tf.compat.v1.global_variables_initializer())
    for step in range(args.steps):
        rows = slice(16 * (step % 4), 16 * (step % 4 + 1))
        print("step loss %r" % float(session.run(train, {x: data[rows], y: labels[rows]})), flush=True)
