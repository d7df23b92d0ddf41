"""tensorflow-estimator 1.15: a canned DNNClassifier on numeric feature columns fed by
tf.compat.v1.estimator.inputs.numpy_input_fn, whose FeedingQueueRunner threads run the session
while the training runs wait for them. argv: --steps N MODEL_DIR."""
import argparse

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("model_dir")
args = parser.parse_args()
rng = np.random.RandomState(0)
features = {"a": rng.randn(64).astype(np.float32), "b": rng.randn(64).astype(np.float32)}
labels = (features["a"] + features["b"] > 0).astype(np.int32)
input_fn = tf.compat.v1.estimator.inputs.numpy_input_fn(features, labels, batch_size=8, num_epochs=None,
                                                        shuffle=True)
columns = [tf.feature_column.numeric_column(name) for name in sorted(features)]
config = tf.estimator.RunConfig(tf_random_seed=1, save_checkpoints_steps=None, save_checkpoints_secs=None,
                                save_summary_steps=10 ** 6, log_step_count_steps=10 ** 6)
model = tf.estimator.DNNClassifier([4], columns, model_dir=args.model_dir, config=config)
model.train(input_fn, steps=args.steps)
print("trained", flush=True)
