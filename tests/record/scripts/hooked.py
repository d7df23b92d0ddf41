"""A MonitoredTrainingSession whose hooks fetch what the train op changes, unordered with it:
LoggingTensorHook (the global step, the loss, a weight), StepCounterHook (the global step) and a
summary of the weight (a histogram). Knows nothing about tracekit. argv: --steps N [--logdir D]."""
import argparse
import tempfile

import numpy as np
import tensorflow as tf

if hasattr(tf.compat.v1, "disable_eager_execution"):
    tf.compat.v1.disable_eager_execution()
parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=4)
parser.add_argument("--logdir", default=None)
args = parser.parse_args()
data = np.arange(40, dtype=np.float32).reshape(10, 4) / 40.0
features = tf.compat.v1.data.make_one_shot_iterator(
    tf.data.Dataset.from_tensor_slices(data).repeat().batch(2)).get_next()
w = tf.compat.v1.get_variable("w", [4, 1], initializer=tf.compat.v1.ones_initializer())
loss = tf.reduce_mean(tf.square(tf.matmul(features, w)))
step = tf.compat.v1.train.get_or_create_global_step()
train = tf.compat.v1.train.AdamOptimizer(0.1).minimize(loss, global_step=step)
tf.compat.v1.summary.histogram("w", w)
hooks = [tf.compat.v1.train.StopAtStepHook(last_step=args.steps),
         tf.compat.v1.train.LoggingTensorHook({"step": step, "loss": loss, "w": w}, every_n_iter=1)]
with tf.compat.v1.train.MonitoredTrainingSession(
        hooks=hooks, checkpoint_dir=args.logdir or tempfile.mkdtemp(), save_checkpoint_secs=None,
        save_summaries_steps=1, log_step_count_steps=1) as sess:
    while not sess.should_stop():
        sess.run(train)
print("hooked done")
