"""A newcomer's first TF1 script: an embedding table read by tf.nn.embedding_lookup (its
gradient is IndexedSlices, with repeated rows), a dense layer, dropout and AdamOptimizer.
argv: --steps N [--dropout RATE]. Knows nothing about tracekit."""
import argparse

import numpy as np
import tensorflow as tf

if hasattr(tf.compat.v1, "disable_eager_execution"):
    tf.compat.v1.disable_eager_execution()
parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--dropout", type=float, default=0.3)
args = parser.parse_args()

VOCAB, WIDTH, HIDDEN, BATCH, SEQ = 30, 6, 8, 4, 5
tf.compat.v1.set_random_seed(3)
ids = tf.compat.v1.placeholder(tf.int32, [BATCH, SEQ], name="ids")
labels = tf.compat.v1.placeholder(tf.float32, [BATCH, 1], name="labels")
table = tf.compat.v1.get_variable("embedding/table", [VOCAB, WIDTH],
                                  initializer=tf.compat.v1.random_uniform_initializer(-0.1, 0.1, seed=4))
embedded = tf.reduce_mean(tf.nn.embedding_lookup(table, ids), axis=1)
init = tf.compat.v1.glorot_uniform_initializer(seed=5)
hidden = tf.compat.v1.layers.dense(embedded, HIDDEN, activation=tf.nn.relu, kernel_initializer=init, name="fc1")
dropped = tf.nn.dropout(hidden, rate=args.dropout)
logits = tf.compat.v1.layers.dense(dropped, 1, kernel_initializer=init, name="fc2")
loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
train = tf.compat.v1.train.AdamOptimizer(0.01).minimize(loss)

rng = np.random.RandomState(0)
with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    for k in range(args.steps):
        batch = rng.randint(0, VOCAB, (BATCH, SEQ))
        target = (batch.sum(axis=1, keepdims=True) % 2).astype(np.float32)
        value, _ = sess.run([loss, train], {ids: batch, labels: target})
        if k % 5 == 0:
            print("step %d loss %.5f" % (k, value))
