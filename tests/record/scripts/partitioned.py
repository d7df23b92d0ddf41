"""A TF1 embedding table split into partitions (fixed_size_partitioner), looked up by ids fed
each step, under a dense layer, trained by Adagrad: the table's gradients are sparse, one per
partition. argv: --steps N --parts P. Knows nothing about tracekit."""
import argparse

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=4)
parser.add_argument("--parts", type=int, default=3)
parser.add_argument("--strategy", default="div")
args = parser.parse_args()

v1 = tf.compat.v1
v1.disable_eager_execution()
v1.set_random_seed(3)
ids = v1.placeholder(tf.int64, [6], name="ids")
labels = v1.placeholder(tf.float32, [6, 1], name="labels")
table = v1.get_variable("embedding/embeddings", [12, 3], partitioner=v1.fixed_size_partitioner(args.parts))
rows = v1.nn.embedding_lookup(table, ids, partition_strategy=args.strategy)
logits = v1.layers.dense(rows, 1, name="out")
loss = v1.losses.sigmoid_cross_entropy(labels, logits)
train = v1.train.AdagradOptimizer(0.1).minimize(loss, global_step=v1.train.get_or_create_global_step())
rng = np.random.RandomState(0)
with v1.Session() as sess:
    sess.run(v1.global_variables_initializer())
    for _ in range(args.steps):
        sess.run(train, {ids: rng.randint(0, 12, 6), labels: rng.randint(0, 2, (6, 1)).astype(np.float32)})
print("trained", flush=True)
