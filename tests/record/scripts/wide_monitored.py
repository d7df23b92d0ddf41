"""A ReLU MLP wide enough that its kernels are digested in the graph (512 x 512), Adam, under a
MonitoredTrainingSession (which finalizes its graph before the first step), 12 steps."""
import numpy as np
import tensorflow as tf

v1 = tf.compat.v1
v1.set_random_seed(1)
x = v1.placeholder(tf.float32, [32, 64])
y = v1.placeholder(tf.int64, [32])
hidden = v1.layers.dense(x, 512, activation=tf.nn.relu)
hidden = v1.layers.dense(hidden, 512, activation=tf.nn.tanh)
loss = v1.losses.sparse_softmax_cross_entropy(y, v1.layers.dense(hidden, 10))
train = v1.train.AdamOptimizer(1e-3).minimize(loss, global_step=v1.train.get_or_create_global_step())
rs = np.random.RandomState(0)
with v1.train.MonitoredTrainingSession(save_checkpoint_secs=None, save_summaries_steps=None,
                                       log_step_count_steps=None) as sess:
    for _ in range(12):
        sess.run([train, loss], {x: rs.standard_normal((32, 64)).astype(np.float32), y: rs.randint(0, 10, 32)})
