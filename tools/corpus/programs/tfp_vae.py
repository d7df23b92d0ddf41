"""tensorflow-probability 0.8: a variational autoencoder as TFP's own VAE example builds one: an
encoder of tf.compat.v1.layers giving a diagonal tfd.MultivariateNormalDiag posterior, a latent
code drawn from it by reparameterization (a random draw every step), a Bernoulli decoder, the
analytic KL divergence to a standard normal prior by tfd.kl_divergence, the negative ELBO
minimized by Adam in a Session loop that prints it. argv: --steps N."""
import argparse

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

tfd = tfp.distributions
parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
args = parser.parse_args()
rng = np.random.RandomState(0)
images = (rng.rand(64, 12) > 0.5).astype(np.float32)
tf.compat.v1.set_random_seed(1)
x = tf.compat.v1.placeholder(tf.float32, [None, 12], name="x")
hidden = tf.compat.v1.layers.dense(x, 16, activation=tf.nn.softplus, name="encoder/hidden")
params = tf.compat.v1.layers.dense(hidden, 2 * 3, name="encoder/params")
posterior = tfd.MultivariateNormalDiag(loc=params[:, :3], scale_diag=tf.nn.softplus(params[:, 3:] - 1.0) + 1e-5)
code = posterior.sample()
prior = tfd.MultivariateNormalDiag(loc=tf.zeros(3), scale_diag=tf.ones(3))
hidden = tf.compat.v1.layers.dense(code, 16, activation=tf.nn.softplus, name="decoder/hidden")
likelihood = tfd.Independent(tfd.Bernoulli(logits=tf.compat.v1.layers.dense(hidden, 12, name="decoder/logits")), 1)
elbo = tf.reduce_mean(likelihood.log_prob(x) - tfd.kl_divergence(posterior, prior))
loss = -elbo
train = tf.compat.v1.train.AdamOptimizer(0.01).minimize(loss)
with tf.compat.v1.Session() as session:
    session.run(tf.compat.v1.global_variables_initializer())
    for step in range(args.steps):
        value, _ = session.run([loss, train], {x: images[16 * (step % 4):16 * (step % 4 + 1)]})
        print("step loss %r" % float(value), flush=True)
