"""tensorflow-estimator 1.15: a canned LinearClassifier on a vocabulary column and a bucketized
numeric column, fed by tf.data; FTRL (its default), sparse gradients, partitioned weights.
argv: --steps N MODEL_DIR."""
import argparse

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("model_dir")
args = parser.parse_args()
rng = np.random.RandomState(1)
data = {"city": np.array(["oslo", "lima", "pune"])[rng.randint(0, 3, 48)], "age": rng.randn(48).astype(np.float32)}
labels = ((data["age"] > 0) ^ (data["city"] == "lima")).astype(np.int32)
city = tf.feature_column.categorical_column_with_vocabulary_list("city", ["oslo", "lima", "pune"])
age = tf.feature_column.bucketized_column(tf.feature_column.numeric_column("age"), [-1.0, 0.0, 1.0])
config = tf.estimator.RunConfig(tf_random_seed=1, save_checkpoints_steps=None, save_checkpoints_secs=None,
                                save_summary_steps=10 ** 6, log_step_count_steps=10 ** 6)
model = tf.estimator.LinearClassifier([city, age], model_dir=args.model_dir, config=config)
model.train(lambda: tf.data.Dataset.from_tensor_slices((data, labels)).repeat().batch(8), steps=args.steps)
print("trained", flush=True)
