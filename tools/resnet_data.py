"""Real training state for the store benchmark: tf_slim resnet_v1_50 on TF 1.15.

Runs in the legacy environment (Python 3.7, TF 1.15.5, tf_slim). Trains
resnet_v1_50 (64x64 inputs, batch 8, 10 classes, SGD with momentum) for a few
steps and saves, as plain uncompressed .npz files, the initial variables and per
step the variables, momentum slots and gradients:

    .venv-legacy/bin/python tools/resnet_data.py [--steps 5] [--out build/bench/resnet_v1_50]

~280 MB a step; the output is not committed (build/ is ignored).
"""

from __future__ import print_function

import argparse
import os
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def build(batch=8, size=64, classes=10, seed=0):
    import tensorflow as tf
    import tf_slim as slim
    from tf_slim.nets import resnet_v1

    tf.compat.v1.set_random_seed(seed)
    images = tf.compat.v1.placeholder(tf.float32, [batch, size, size, 3], name="images")
    labels = tf.compat.v1.placeholder(tf.int32, [batch], name="labels")
    with slim.arg_scope(resnet_v1.resnet_arg_scope()):
        logits, _ = resnet_v1.resnet_v1_50(images, num_classes=classes, is_training=True)
    logits = tf.reshape(logits, [batch, classes])
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    total = tf.compat.v1.losses.get_total_loss()
    optimizer = tf.compat.v1.train.MomentumOptimizer(0.01, 0.9)
    grads_and_vars = optimizer.compute_gradients(total)
    update_ops = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
    with tf.control_dependencies(update_ops):
        train = optimizer.apply_gradients(grads_and_vars, global_step=tf.compat.v1.train.get_or_create_global_step())
    return images, labels, loss, train, grads_and_vars, optimizer


def batches(batch=8, size=64, classes=10, seed=0):
    rng = np.random.RandomState(seed)
    while True:
        yield (rng.rand(batch, size, size, 3).astype(np.float32),
               rng.randint(0, classes, size=batch).astype(np.int32))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--out", default=os.path.join("build", "bench", "resnet_v1_50"))
    args = parser.parse_args()
    import tensorflow as tf

    images, labels, loss, train, grads_and_vars, optimizer = build()
    slots = {v.name for v in tf.compat.v1.global_variables() if v.name.endswith("/Momentum:0")}
    variables = tf.compat.v1.global_variables()
    grads = {"grad/" + v.name: g for g, v in grads_and_vars}
    os.makedirs(args.out, exist_ok=True)
    with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())

        def state():
            values = sess.run({("slot/" if v.name in slots else "var/") + v.name: v for v in variables})
            return values

        np.savez(os.path.join(args.out, "initial.npz"), **state())
        data = batches()
        for k in range(args.steps):
            x, y = next(data)
            t0 = time.time()
            out = sess.run({"loss": loss, "train": train, "grads": grads}, {images: x, labels: y})
            values = state()
            values.update(out["grads"])
            np.savez(os.path.join(args.out, "step_%03d.npz" % k), **values)
            total = sum(v.size for v in values.values())
            print("step %d: loss %.4f, %.1fM values, %.2fs" % (k, out["loss"], total / 1e6, time.time() - t0),
                  flush=True)


if __name__ == "__main__":
    main()
