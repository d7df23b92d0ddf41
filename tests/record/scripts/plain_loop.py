"""A plain TF1 training loop (feed_dict, Adam, dropout). argv: --steps N [--exit CODE] [--train-only]
(each step runs only the train op: `sess.run(train)` returns None) [--optimizer NAME] (adam,
adagrad, ftrl, rmsprop, rmsprop-a2c, rmsprop-centered, adadelta, proximal-adagrad, adamw) [--dropout RATE] (0: none)
[--clip NORM] (the gradients clipped by tf.clip_by_global_norm before the update; 0: not).
CRASH_AT=k in the environment raises after k steps. Knows nothing about tracekit."""
import argparse
import os
import sys

import numpy as np
import tensorflow as tf

if hasattr(tf.compat.v1, "disable_eager_execution"):
    tf.compat.v1.disable_eager_execution()
parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--exit", type=int, default=0)
parser.add_argument("--train-only", action="store_true")
OPTIMIZERS = {"adam": lambda: tf.compat.v1.train.AdamOptimizer(0.05),
              "adagrad": lambda: tf.compat.v1.train.AdagradOptimizer(0.05),
              "ftrl": lambda: tf.compat.v1.train.FtrlOptimizer(0.05, l1_regularization_strength=0.001),
              "rmsprop": lambda: tf.compat.v1.train.RMSPropOptimizer(0.05, momentum=0.5),
              # stable-baselines A2C's: no momentum, whose slot TF1 keeps all the same
              "rmsprop-a2c": lambda: tf.compat.v1.train.RMSPropOptimizer(0.05, decay=0.99, epsilon=1e-5),
              "rmsprop-centered": lambda: tf.compat.v1.train.RMSPropOptimizer(0.05, momentum=0.5, centered=True),
              "adadelta": lambda: tf.compat.v1.train.AdadeltaOptimizer(1.0, epsilon=1e-7),
              "proximal-adagrad": lambda: tf.compat.v1.train.ProximalAdagradOptimizer(0.05, l2_regularization_strength=0.01),
              # decoupled weight decay, not multiplied by the rate (torch's AdamW and optax.adamw multiply)
              "adamw": lambda: tf.contrib.opt.AdamWOptimizer(weight_decay=0.01, learning_rate=0.05)}
parser.add_argument("--optimizer", choices=sorted(OPTIMIZERS), default="adam")
parser.add_argument("--dropout", type=float, default=0.3)
parser.add_argument("--clip", type=float, default=0.0)
args = parser.parse_args()
tf.compat.v1.set_random_seed(1)
x = tf.compat.v1.placeholder(tf.float32, [4, 3], name="x")
# Seeded initializers: on TF 2 an unseeded Keras initializer draws its seed from Python's `random`.
init = tf.compat.v1.glorot_uniform_initializer(seed=2)
hidden = tf.compat.v1.layers.dense(x, 5, activation=tf.nn.relu, kernel_initializer=init, name="hidden")
dropped = tf.nn.dropout(hidden, rate=args.dropout) if args.dropout else hidden
out = tf.compat.v1.layers.dense(dropped, 1, kernel_initializer=init, name="out")
loss = tf.reduce_mean(tf.square(out - 1.0))
optimizer = OPTIMIZERS[args.optimizer]()
if args.clip:
    grads, variables = zip(*optimizer.compute_gradients(loss))
    grads, _ = tf.clip_by_global_norm(grads, args.clip)
    train = optimizer.apply_gradients(zip(grads, variables))
elif args.optimizer == "adamw":  # its decay writes the variables the gradients read: ordered after them
    grads_and_vars = optimizer.compute_gradients(loss)
    with tf.control_dependencies([g for g, _ in grads_and_vars]):
        train = optimizer.apply_gradients(grads_and_vars)
else:
    train = optimizer.minimize(loss)
rng = np.random.RandomState(0)
crash_at = int(os.environ.get("CRASH_AT", "-1"))
with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    for step in range(args.steps):
        if step == crash_at:
            raise RuntimeError("legacy script crashed at step %d" % step)
        feed = {x: rng.randn(4, 3).astype(np.float32)}
        if args.train_only:
            sess.run(train, feed)
            print("step %d" % step, flush=True)
        else:
            _, value = sess.run([train, loss], feed)
            print("step %d loss %.5f" % (step, value), flush=True)
sys.exit(args.exit)
