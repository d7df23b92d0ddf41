"""A TF1 loop fed by a queue: a QueueRunner thread enqueues examples (session runs of its own)
while the main thread trains on batches of 4, more than the queue holds, so each training run
waits for enqueues made during it. argv: --steps N. Knows nothing about tracekit."""
import argparse

import numpy as np
import tensorflow as tf

if hasattr(tf.compat.v1, "disable_eager_execution"):
    tf.compat.v1.disable_eager_execution()
parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=5)
args = parser.parse_args()
tf.compat.v1.set_random_seed(1)
data = np.random.RandomState(0).randn(64, 3).astype(np.float32)
queue = tf.compat.v1.FIFOQueue(2, [tf.float32], shapes=[[3]])
example = tf.compat.v1.random_shuffle(tf.constant(data))[0]
tf.compat.v1.train.add_queue_runner(tf.compat.v1.train.QueueRunner(queue, [queue.enqueue([example])]))
x = queue.dequeue_many(4, name="x")
init = tf.compat.v1.glorot_uniform_initializer(seed=2)
out = tf.compat.v1.layers.dense(x, 1, kernel_initializer=init, name="out")
loss = tf.reduce_mean(tf.square(out - 1.0))
train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    coord = tf.compat.v1.train.Coordinator()
    threads = tf.compat.v1.train.start_queue_runners(sess, coord)
    for step in range(args.steps):
        _, value = sess.run([train, loss])
        print("step %d loss %.5f" % (step, value), flush=True)
    coord.request_stop()
    sess.run(queue.close(cancel_pending_enqueues=True))
    coord.join(threads)
