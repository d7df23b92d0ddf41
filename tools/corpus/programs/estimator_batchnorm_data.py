"""tensorflow-estimator 1.15: a canned DNNClassifier with batch_norm=True and dropout (its hidden
layers normalized by tf.compat.v1.layers.batch_normalization, their moving averages in
UPDATE_OPS, which the canned model runs with its train op), fed by a tf.data pipeline that
shuffles its rows (a seeded shuffle) and augments them in a map with random noise (a draw in the
input pipeline). argv: --steps N MODEL_DIR."""
import argparse

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("model_dir")
args = parser.parse_args()
rng = np.random.RandomState(0)
features = {"a": rng.randn(64).astype(np.float32), "b": rng.randn(64).astype(np.float32)}
labels = (features["a"] - 0.5 * features["b"] > 0).astype(np.int32)


def augment(row, label):
    return {name: value + tf.random.normal([], stddev=0.1, seed=7) for name, value in row.items()}, label


def input_fn():
    data = tf.data.Dataset.from_tensor_slices((features, labels)).shuffle(64, seed=3).map(augment)
    return data.repeat().batch(16)


columns = [tf.feature_column.numeric_column(name) for name in sorted(features)]
config = tf.estimator.RunConfig(tf_random_seed=1, save_checkpoints_steps=None, save_checkpoints_secs=None,
                                save_summary_steps=10 ** 6, log_step_count_steps=10 ** 6)
model = tf.estimator.DNNClassifier([8, 8], columns, model_dir=args.model_dir, config=config, batch_norm=True,
                                   dropout=0.2)
model.train(input_fn, steps=args.steps)
print("trained", flush=True)
