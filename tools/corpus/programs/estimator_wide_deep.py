"""tensorflow-estimator 1.15: a canned Wide & Deep model (DNNLinearCombinedClassifier) on feature
columns: a vocabulary column, a crossed column and numeric columns for the linear part (FTRL), an
embedding and numeric columns for the DNN part (Adagrad), fed by tf.data. Its variables are
partitioned (one partition), its linear part's gradients are sparse. argv: --steps N [--batch B]
[--hidden H] [--scale S] MODEL_DIR: batches of B rows of 8 * B (8 by default), H hidden units (4), the
numeric features times S (1): a big batch of large features sums to gradients whose squares fill
Adagrad's accumulators to 1e4 and more at the first step."""
import argparse

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--batch", type=int, default=8)
parser.add_argument("--hidden", type=int, default=4)
parser.add_argument("--scale", type=float, default=1.0)
parser.add_argument("model_dir")
args = parser.parse_args()

COLORS = ["red", "green", "blue", "black"]
SHAPES = ["circle", "square", "star"]
rng = np.random.RandomState(0)
N = 8 * args.batch
data = {"color": np.array(COLORS)[rng.randint(0, 4, N)], "shape": np.array(SHAPES)[rng.randint(0, 3, N)],
        "size": rng.randn(N).astype(np.float32), "weight": rng.randn(N).astype(np.float32)}
labels = ((data["size"] + (data["color"] == "red")) > 0.5).astype(np.int32)
data["size"] *= np.float32(args.scale)
data["weight"] *= np.float32(args.scale)


def input_fn():
    dataset = tf.data.Dataset.from_tensor_slices((data, labels))
    return dataset.repeat().batch(args.batch)


color = tf.feature_column.categorical_column_with_vocabulary_list("color", COLORS)
shape = tf.feature_column.categorical_column_with_vocabulary_list("shape", SHAPES)
size = tf.feature_column.numeric_column("size")
weight = tf.feature_column.numeric_column("weight")
crossed = tf.feature_column.crossed_column([color, shape], hash_bucket_size=16)
config = tf.estimator.RunConfig(tf_random_seed=1, save_checkpoints_steps=None, save_checkpoints_secs=None,
                                save_summary_steps=10 ** 6, log_step_count_steps=10 ** 6)
model = tf.estimator.DNNLinearCombinedClassifier(
    linear_feature_columns=[color, crossed, size],
    dnn_feature_columns=[tf.feature_column.embedding_column(shape, 3), size, weight],
    dnn_hidden_units=[args.hidden], model_dir=args.model_dir, config=config)
model.train(input_fn, steps=args.steps)
print("trained", flush=True)
