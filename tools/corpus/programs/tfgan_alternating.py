"""TF-GAN (tensorflow-gan 2.0, the release for TF 1.15): gan_model over a small generator and
discriminator, gan_loss with the modified (non-saturating) losses, gan_train_ops with an Adam per
network; the two train ops run in alternating session runs, generator then discriminator, each
differentiating its own loss. Prints, for each training step, the loss that step's optimizer
minimizes. argv: --steps N (generator-discriminator pairs)."""
import argparse

import numpy as np
import tensorflow as tf
import tensorflow_gan as tfgan

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
args = parser.parse_args()
tf.compat.v1.set_random_seed(1)
dense = tf.compat.v1.layers.dense


def generator_fn(noise):
    return dense(dense(noise, 16, tf.nn.relu, name="hidden"), 2, name="out")


def discriminator_fn(data, unused_conditioning):
    return dense(dense(data, 16, tf.nn.relu, name="hidden"), 1, name="logit")


noise = tf.compat.v1.placeholder(tf.float32, [8, 4], name="noise")
real = tf.compat.v1.placeholder(tf.float32, [8, 2], name="real")
model = tfgan.gan_model(generator_fn, discriminator_fn, real_data=real, generator_inputs=noise)
loss = tfgan.gan_loss(model, generator_loss_fn=tfgan.losses.modified_generator_loss,
                      discriminator_loss_fn=tfgan.losses.modified_discriminator_loss)
ops = tfgan.gan_train_ops(model, loss, tf.compat.v1.train.AdamOptimizer(1e-3, 0.5),
                          tf.compat.v1.train.AdamOptimizer(1e-3, 0.5))
rng = np.random.RandomState(0)
with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    for _ in range(args.steps):
        for which, train in ((loss.generator_loss, ops.generator_train_op),
                             (loss.discriminator_loss, ops.discriminator_train_op)):
            feed = {noise: rng.randn(8, 4), real: rng.randn(8, 2) * 0.5 + 1.0}
            value, _ = sess.run([which, train], feed)
            print("step loss %.9g" % value, flush=True)
