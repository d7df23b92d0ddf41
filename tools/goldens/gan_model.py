"""A GAN's alternating training steps in TF1: one run trains the discriminator, the next the
generator, each with its own named AdamOptimizer (beta1=0.5), fed real samples and noise.

The generator maps 4-d noise to 2-d points through a 16-unit hidden layer; the discriminator
scores points through a 16-unit hidden layer. The discriminator's optimizer counts
global_step. Every recorded step is one sess.run of one train op: even steps "d_adam",
odd steps "g_adam" (the golden's train_ops). The generator's output is tapped. Run in the
legacy environment:

    .venv-legacy/bin/python tools/goldens/gan_model.py goldens/gan_model.h5 [--steps 12]
"""

from __future__ import print_function

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

import tracekit  # noqa: E402
import tracekit.tf1  # noqa: E402
import tensorflow as tf  # noqa: E402

BATCH, NOISE = 8, 4


def real_batch(rng):
    """Points on a noisy ring: what the generator learns to draw."""
    angle = rng.uniform(0, 2 * np.pi, BATCH)
    return (np.stack([np.cos(angle), np.sin(angle)], axis=1) + 0.05 * rng.randn(BATCH, 2)).astype(np.float32)


def discriminator(x, reuse):
    with tf.compat.v1.variable_scope("discriminator", reuse=reuse):
        hidden = tf.compat.v1.layers.dense(x, 16, activation=tf.nn.leaky_relu, name="hidden")
        return tf.compat.v1.layers.dense(hidden, 1, name="logit")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=12)
    args = parser.parse_args()
    meta = {"example": "gan", "description": "alternating discriminator and generator train ops, two named Adams"}
    with tracekit.tf1.record(args.out, seed=2, meta=meta) as rec:
        z = tf.compat.v1.placeholder(tf.float32, [BATCH, NOISE], name="z")
        real = tf.compat.v1.placeholder(tf.float32, [BATCH, 2], name="real")
        with tf.compat.v1.variable_scope("generator"):
            hidden = tf.compat.v1.layers.dense(z, 16, activation=tf.nn.relu, name="hidden")
            fake = tracekit.tap("fake", tf.compat.v1.layers.dense(hidden, 2, name="out"))
        d_real, d_fake = discriminator(real, reuse=False), discriminator(fake, reuse=True)
        xent = tf.compat.v1.losses.sigmoid_cross_entropy
        d_loss = xent(tf.ones_like(d_real), d_real) + xent(tf.zeros_like(d_fake), d_fake)
        g_loss = xent(tf.ones_like(d_fake), d_fake)
        scope_vars = tf.compat.v1.trainable_variables
        global_step = tf.compat.v1.train.get_or_create_global_step()
        d_train = tf.compat.v1.train.AdamOptimizer(1e-2, beta1=0.5, name="d_adam").minimize(
            d_loss, var_list=scope_vars("discriminator"), global_step=global_step)
        g_train = tf.compat.v1.train.AdamOptimizer(2e-2, beta1=0.5, name="g_adam").minimize(
            g_loss, var_list=scope_vars("generator"))
        sess = rec.session(tf.compat.v1.Session())
        sess.run(tf.compat.v1.global_variables_initializer())
        rng = np.random.RandomState(4)
        for step in range(args.steps):
            feed = {z: rng.randn(BATCH, NOISE).astype(np.float32), real: real_batch(rng)}
            sess.run(d_train if step % 2 == 0 else g_train, feed)
    print("recorded %d steps into %s" % (rec.steps, args.out))


if __name__ == "__main__":
    main()
