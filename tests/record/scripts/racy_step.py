"""TF1 research-code style: the train op groups the update with `global_step.assign_add(1)`,
unordered, while the learning rate decays with global_step, so each run may read the counter
before or after its increment (a race). --ordered passes global_step to apply_gradients, which
orders the increment after the update. --late-read reads the counter for the rate after the forward
pass (the increment, which waits for nothing, then runs first on most steps). --opaque-read reads it
through an addition of 0, whose output a recorder cannot take for the counter's value. --adam trains with
Adam, whose bias correction counts in its own beta powers. argv: --steps N [--ordered] [--late-read]
[--opaque-read] [--adam]. Knows nothing about tracekit."""
import argparse

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--ordered", action="store_true")
parser.add_argument("--late-read", action="store_true")
parser.add_argument("--opaque-read", action="store_true")
parser.add_argument("--adam", action="store_true")
args = parser.parse_args()

v1 = tf.compat.v1
v1.disable_eager_execution()
x = v1.placeholder(tf.float32, [4, 3], name="x")
w = v1.get_variable("w", [3, 1], initializer=v1.ones_initializer())
loss = tf.reduce_mean(tf.square(tf.matmul(x, w)))
global_step = v1.train.get_or_create_global_step()
counter = global_step
if args.late_read:
    with tf.control_dependencies([loss]):
        counter = global_step.read_value()
if args.opaque_read:
    counter = counter + 0
lr = v1.train.exponential_decay(0.1, counter, decay_steps=1, decay_rate=0.5, staircase=True)
optimizer = v1.train.AdamOptimizer(lr) if args.adam else v1.train.GradientDescentOptimizer(lr)
grads = optimizer.compute_gradients(loss)
if args.ordered:
    train = optimizer.apply_gradients(grads, global_step=global_step)
else:
    train = tf.group(optimizer.apply_gradients(grads), v1.assign_add(global_step, 1))
rng = np.random.RandomState(0)
with v1.Session() as sess:
    sess.run(v1.global_variables_initializer())
    for _ in range(args.steps):
        sess.run(train, {x: rng.randn(4, 3).astype(np.float32)})
print("trained", flush=True)
