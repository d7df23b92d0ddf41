"""TF1 research-code style training: a custom optimizer (a tf.compat.v1.train.Optimizer subclass
whose apply_gradients updates by assign ops: Adam with decoupled weight decay), gradients from
tf.gradients clipped by global norm, and the global step advanced by hand in the same train op,
unordered with the update (--ordered: after it). --trainable-slots: the moments are trainable
variables, as standalone Keras' K.variable makes them. argv: --steps N [--ordered]
[--trainable-slots] [--features F --width W] (default 3, 5). Knows nothing about tracekit."""
import argparse
import re

import numpy as np
import tensorflow as tf

if hasattr(tf.compat.v1, "disable_eager_execution"):
    tf.compat.v1.disable_eager_execution()


class AdamWeightDecay(tf.compat.v1.train.Optimizer):
    def __init__(self, learning_rate, weight_decay=0.01, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                 trainable_slots=False):
        super(AdamWeightDecay, self).__init__(False, "AdamWeightDecay")
        self.trainable_slots = trainable_slots
        self.learning_rate, self.weight_decay = learning_rate, weight_decay
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        assignments = []
        for grad, param in grads_and_vars:
            base = re.match("^(.*):\\d+$", param.name).group(1)
            m = tf.compat.v1.get_variable(base + "/adam_m", param.shape.as_list(), tf.float32,
                                          trainable=self.trainable_slots, initializer=tf.compat.v1.zeros_initializer())
            v = tf.compat.v1.get_variable(base + "/adam_v", param.shape.as_list(), tf.float32,
                                          trainable=self.trainable_slots, initializer=tf.compat.v1.zeros_initializer())
            next_m = self.beta_1 * m + (1.0 - self.beta_1) * grad
            next_v = self.beta_2 * v + (1.0 - self.beta_2) * tf.square(grad)
            update = next_m / (tf.sqrt(next_v) + self.epsilon) + self.weight_decay * param
            assignments += [param.assign(param - self.learning_rate * update), m.assign(next_m), v.assign(next_v)]
        return tf.group(*assignments, name=name)


parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--ordered", action="store_true", help="advance the global step after the update (no race)")
parser.add_argument("--trainable-slots", action="store_true", help="make the moments trainable variables")
parser.add_argument("--features", type=int, default=3)
parser.add_argument("--width", type=int, default=5)
args = parser.parse_args()
tf.compat.v1.set_random_seed(1)
x = tf.compat.v1.placeholder(tf.float32, [4, args.features], name="x")
init = tf.compat.v1.glorot_uniform_initializer(seed=2)
hidden = tf.compat.v1.layers.dense(x, args.width, activation=tf.nn.relu, kernel_initializer=init, name="hidden")
out = tf.compat.v1.layers.dense(hidden, 1, kernel_initializer=init, name="out")
loss = tf.reduce_mean(tf.square(out - 1.0))
global_step = tf.compat.v1.train.get_or_create_global_step()
learning_rate = tf.compat.v1.train.polynomial_decay(0.01, global_step, 100, end_learning_rate=0.0)
tvars = tf.compat.v1.trainable_variables()
grads = tf.gradients(loss, tvars)
grads, _ = tf.clip_by_global_norm(grads, clip_norm=1.0)
optimizer = AdamWeightDecay(learning_rate, trainable_slots=args.trainable_slots)
train = optimizer.apply_gradients(zip(grads, tvars), global_step=global_step)
if args.ordered:
    with tf.control_dependencies([train]):
        train = global_step.assign_add(1).op
else:
    train = tf.group(train, [global_step.assign(global_step + 1)])
rng = np.random.RandomState(0)
with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    for step in range(args.steps):
        _, value = sess.run([train, loss], {x: rng.randn(4, args.features).astype(np.float32)})
        print("step %d loss %.5f" % (step, value), flush=True)
