"""TF 1.15's mixed-precision loss scaling: tf.compat.v1.train.experimental.
MixedPrecisionLossScaleOptimizer with a dynamic loss scale around Adam. It differentiates the
loss times the scale through the optimizer it wraps, unscales the gradients, and applies them
inside a tf.cond on their being finite (the ops in its branches are not fetchable). argv:
--steps N. Prints each step's loss."""
import argparse

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=4)
parser.add_argument("--initial-scale", type=float, default=2.0 ** 15,
                    help="the dynamic scale's start: 3e38 makes the first step's gradients overflow (it is skipped)")
parser.add_argument("--multiplier", type=float, default=2.0, help="what a skipped step divides the scale by")
args = parser.parse_args()
v1 = tf.compat.v1
x = v1.placeholder(tf.float32, [8, 4], name="x")
y = v1.placeholder(tf.float32, [8, 1], name="y")
h = v1.layers.dense(x, 16, activation=tf.nn.relu, kernel_initializer=v1.glorot_uniform_initializer(seed=1), name="h")
out = v1.layers.dense(h, 1, kernel_initializer=v1.glorot_uniform_initializer(seed=2), name="out")
loss = tf.reduce_mean(tf.square(out - y))
scale = v1.train.experimental.DynamicLossScale(initial_loss_scale=args.initial_scale, multiplier=args.multiplier)
opt = v1.train.experimental.MixedPrecisionLossScaleOptimizer(v1.train.AdamOptimizer(0.01), scale)
train = opt.minimize(loss, global_step=v1.train.get_or_create_global_step())
rng = np.random.RandomState(0)
with v1.Session() as sess:
    sess.run(v1.global_variables_initializer())
    for _ in range(args.steps):
        value, _ = sess.run([loss, train], {x: rng.randn(8, 4), y: rng.randn(8, 1)})
        print("step loss %.9g" % value, flush=True)
