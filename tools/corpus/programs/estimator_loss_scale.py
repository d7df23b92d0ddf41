"""tensorflow-estimator 1.15 with TensorFlow's mixed-precision loss scaling: a canned DNNClassifier
whose optimizer is tf.compat.v1.train.experimental.MixedPrecisionLossScaleOptimizer over Adam with
a dynamic loss scale (the loss multiplied by the scale before differentiation, the gradients divided
by it, the update applied in a tf.cond only where every gradient is finite, the scale grown after a
run of finite steps), fed by tf.data. argv: --steps N MODEL_DIR."""
import argparse

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("model_dir")
args = parser.parse_args()
rng = np.random.RandomState(0)
features = {"a": rng.randn(64).astype(np.float32), "b": rng.randn(64).astype(np.float32)}
labels = (features["a"] * features["b"] > 0).astype(np.int32)
columns = [tf.feature_column.numeric_column(name) for name in sorted(features)]
config = tf.estimator.RunConfig(tf_random_seed=1, save_checkpoints_steps=None, save_checkpoints_secs=None,
                                save_summary_steps=10 ** 6, log_step_count_steps=10 ** 6)


def optimizer():  # made inside the estimator's graph: the loss scale is a variable of the model
    scale = tf.compat.v1.train.experimental.DynamicLossScale(initial_loss_scale=2.0 ** 10, increment_period=2)
    return tf.compat.v1.train.experimental.MixedPrecisionLossScaleOptimizer(tf.compat.v1.train.AdamOptimizer(0.01),
                                                                           scale)


model = tf.estimator.DNNClassifier([8], columns, model_dir=args.model_dir, config=config,
                                   optimizer=optimizer)
model.train(lambda: tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(16), steps=args.steps)
print("trained", flush=True)
