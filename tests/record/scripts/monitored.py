"""MonitoredTrainingSession over a tf.data pipeline, stopped by StopAtStepHook."""
import numpy as np
import tensorflow as tf

if hasattr(tf.compat.v1, "disable_eager_execution"):
    tf.compat.v1.disable_eager_execution()
data = np.arange(40, dtype=np.float32).reshape(10, 4) / 40.0
features = tf.compat.v1.data.make_one_shot_iterator(
    tf.data.Dataset.from_tensor_slices(data).repeat().batch(2)).get_next()
w = tf.compat.v1.get_variable("w", [4, 1], initializer=tf.compat.v1.ones_initializer())
loss = tf.reduce_mean(tf.square(tf.matmul(features, w)))
step = tf.compat.v1.train.get_or_create_global_step()
train = tf.compat.v1.train.MomentumOptimizer(0.1, 0.9).minimize(loss, global_step=step)
hooks = [tf.compat.v1.train.StopAtStepHook(last_step=4)]
with tf.compat.v1.train.MonitoredTrainingSession(hooks=hooks, save_checkpoint_secs=None,
                                                 save_summaries_steps=None, log_step_count_steps=None) as sess:
    while not sess.should_stop():
        sess.run(train)
print("monitored done")
