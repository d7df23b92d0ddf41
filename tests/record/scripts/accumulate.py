"""Gradient accumulation in the usual public TF1 form: one run zeroes accumulator variables, N
runs each add one micro-batch's gradients to them (`assign_add`), one run applies what they hold
(summed, or divided by N; with --clip, clipped by global norm first) with a tf.compat.v1.train
optimizer. The micro-batch runs fetch nothing but the additions; the apply run returns the mean
of the losses the micro-batches added to a loss total. --conditional: the gradients go to
tf.compat.v1.ConditionalAccumulator's instead (apply_grad in each micro-batch run, take_grad, their
mean, in the apply run; nothing to zero). argv: --micro N, --form sum|mean, --optimizer
adam|momentum, --clip, --steps S, --resource, --dropout, --conditional."""
import argparse

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--micro", type=int, default=3)
parser.add_argument("--form", choices=["sum", "mean"], default="sum")
parser.add_argument("--optimizer", choices=["adam", "momentum"], default="adam")
parser.add_argument("--clip", action="store_true")
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--resource", action="store_true")
parser.add_argument("--dropout", action="store_true")
parser.add_argument("--conditional", action="store_true")
args = parser.parse_args()
v1 = tf.compat.v1
if hasattr(v1, "disable_eager_execution"):  # TF 2's compat.v1 graph mode too
    v1.disable_eager_execution()

x = v1.placeholder(tf.float32, [4, 3], name="x")
y = v1.placeholder(tf.float32, [4, 1], name="y")
with v1.variable_scope("net", use_resource=args.resource):
    h = v1.layers.dense(x, 5, activation=tf.tanh, kernel_initializer=v1.glorot_uniform_initializer(seed=1),
                        name="hidden")
    if args.dropout:
        h = v1.nn.dropout(h, rate=0.25, seed=7)
    out = v1.layers.dense(h, 1, kernel_initializer=v1.glorot_uniform_initializer(seed=2), name="out")
loss = tf.reduce_mean(tf.square(out - y))
params = v1.trainable_variables()
opt = v1.train.AdamOptimizer(0.01) if args.optimizer == "adam" else v1.train.MomentumOptimizer(0.05, 0.9)
step = v1.train.get_or_create_global_step()

total, count = tf.Variable(0.0, trainable=False), tf.Variable(0.0, trainable=False)
grads = opt.compute_gradients(loss, params)
if args.conditional:
    accum = [v1.ConditionalAccumulator(tf.float32, shape=p.shape) for p in params]
    reset = tf.group([total.assign(0.0), count.assign(0.0)])
    compute = tf.group([a.apply_grad(g, local_step=step) for a, (g, _) in zip(accum, grads)]
                       + [total.assign_add(loss), count.assign_add(1.0)])
    applied = [a.take_grad(args.micro) for a in accum]
else:
    accum = [tf.Variable(tf.zeros(p.shape), trainable=False) for p in params]
    reset = tf.group([a.assign(tf.zeros_like(a)) for a in accum] + [total.assign(0.0), count.assign(0.0)])
    compute = tf.group([a.assign_add(g) for a, (g, _) in zip(accum, grads)]
                       + [total.assign_add(loss), count.assign_add(1.0)])
    applied = [a / float(args.micro) if args.form == "mean" else a.read_value() for a in accum]
if args.clip:
    applied, _ = tf.clip_by_global_norm(applied, 0.05)
with tf.control_dependencies([opt.apply_gradients(zip(applied, params), global_step=step)]):
    apply = total / count

rng = np.random.RandomState(0)
with v1.Session() as sess:
    sess.run(v1.global_variables_initializer())
    for k in range(args.steps):
        sess.run(reset)
        for _ in range(args.micro):
            sess.run(compute, {x: rng.randn(4, 3), y: rng.randn(4, 1)})
        print("step %d loss %r" % (k, float(sess.run(apply))), flush=True)
