"""A fine-tuning step in the style of BERT's optimization code: word embeddings read by
tf.gather (their gradient is IndexedSlices), tf.gradients of the loss, tf.clip_by_global_norm,
and a hand-written decoupled-weight-decay Adam (no bias correction) that updates each
parameter and its m and v by assign ops. Prints each step's loss as the script sees it."""

import argparse

import numpy as np
import tensorflow as tf

tf.compat.v1.disable_eager_execution()

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=4)
args = parser.parse_args()

VOCAB, HIDDEN, LABELS, BATCH, SEQ = 40, 8, 3, 4, 5
ids = tf.compat.v1.placeholder(tf.int32, [BATCH, SEQ], name="ids")
labels = tf.compat.v1.placeholder(tf.int32, [BATCH], name="labels")
init = tf.compat.v1.truncated_normal_initializer(stddev=0.02, seed=3)
table = tf.compat.v1.get_variable("embeddings/word_embeddings", [VOCAB, HIDDEN], initializer=init)
gamma = tf.compat.v1.get_variable("embeddings/LayerNorm/gamma", [HIDDEN], initializer=tf.compat.v1.ones_initializer())
hidden = tf.gather(table, tf.reshape(ids, [-1]))  # (BATCH * SEQ, HIDDEN)
hidden = tf.reshape(hidden * gamma, [BATCH, SEQ, HIDDEN])
pooled = tf.reduce_mean(hidden, axis=1)
weights = tf.compat.v1.get_variable("output_weights", [LABELS, HIDDEN], initializer=init)
bias = tf.compat.v1.get_variable("output_bias", [LABELS], initializer=tf.compat.v1.zeros_initializer())
logits = tf.matmul(pooled, weights, transpose_b=True) + bias
loss = tf.reduce_mean(tf.compat.v1.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))

step = tf.compat.v1.train.get_or_create_global_step()
lr = tf.compat.v1.train.polynomial_decay(1e-2, step, 100, end_learning_rate=0.0, power=1.0)
params = tf.compat.v1.trainable_variables()
grads = tf.gradients(loss, params)
grads, _ = tf.clip_by_global_norm(grads, clip_norm=1.0)
updates = []
for param, grad in zip(params, grads):
    name = param.op.name
    m = tf.compat.v1.get_variable(name + "/adam_m", param.shape, trainable=False,
                                  initializer=tf.compat.v1.zeros_initializer())
    v = tf.compat.v1.get_variable(name + "/adam_v", param.shape, trainable=False,
                                  initializer=tf.compat.v1.zeros_initializer())
    next_m = tf.multiply(0.9, m) + tf.multiply(0.1, grad)
    next_v = tf.multiply(0.999, v) + tf.multiply(0.001, tf.square(grad))
    update = next_m / (tf.sqrt(next_v) + 1e-6)
    if "LayerNorm" not in name and "bias" not in name:
        update += 0.01 * param
    updates += [param.assign(param - lr * update), m.assign(next_m), v.assign(next_v)]
train = tf.group(*updates, step.assign(step + 1))

rng = np.random.RandomState(0)
with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    for k in range(args.steps):
        feed = {ids: rng.randint(0, VOCAB, (BATCH, SEQ)), labels: rng.randint(0, LABELS, BATCH)}
        value, _ = sess.run([loss, train], feed)
        print("step %d loss %.7f" % (k, value))
