"""tflearn 0.5.0: a GAN as tflearn's own example writes one: a generator and a discriminator of
tflearn layers, the discriminator applied to real and generated samples with shared weights, two
tflearn.regression trainers (each its own Adam over its own variables, by trainable_vars) fitted
together by tflearn.DNN.fit, whose every step runs one train op, then the other. argv: --steps N
WORKDIR (32 samples in batches of 16: N even)."""
import argparse

import numpy as np
import tensorflow as tf
import tflearn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=4)
parser.add_argument("workdir")
args = parser.parse_args()
rng = np.random.RandomState(0)
real = np.tanh(rng.randn(32, 6)).astype(np.float32)
noise = rng.uniform(-1.0, 1.0, (32, 4)).astype(np.float32)
tflearn.init_graph(seed=1)


def generator(x, reuse=False):
    with tf.variable_scope("Generator", reuse=reuse):
        x = tflearn.fully_connected(x, 8, activation="relu")
        return tflearn.fully_connected(x, 6, activation="tanh")


def discriminator(x, reuse=False):
    with tf.variable_scope("Discriminator", reuse=reuse):
        x = tflearn.fully_connected(x, 8, activation="relu")
        return tflearn.fully_connected(x, 2, activation="softmax")


gen_noise = tflearn.input_data([None, 4], name="input_gen_noise")
disc_noise = tflearn.input_data([None, 4], name="input_disc_noise")
disc_real = tflearn.input_data([None, 6], name="input_disc_real")
disc_fake = discriminator(generator(disc_noise))
disc_real_out = discriminator(disc_real, reuse=True)
disc_net = tf.concat([disc_fake, disc_real_out], axis=0)
gen_vars = tflearn.get_layer_variables_by_scope("Generator")
disc_vars = tflearn.get_layer_variables_by_scope("Discriminator")
disc_target = tflearn.multi_target_data(["target_disc_fake", "target_disc_real"], shape=[None, 2])
disc_model = tflearn.regression(disc_net, optimizer="adam", placeholder=disc_target, loss="categorical_crossentropy",
                                learning_rate=0.01, trainable_vars=disc_vars, batch_size=16, name="target_disc",
                                op_name="DISC")
gan_net = discriminator(generator(gen_noise, reuse=True), reuse=True)
gen_model = tflearn.regression(gan_net, optimizer="adam", loss="categorical_crossentropy", learning_rate=0.01,
                               trainable_vars=gen_vars, batch_size=16, name="target_gen", op_name="GEN")
gan = tflearn.DNN(gen_model, tensorboard_verbose=0, tensorboard_dir=args.workdir)
fake_y, real_y = np.tile([[1.0, 0.0]], (32, 1)), np.tile([[0.0, 1.0]], (32, 1))
gan.fit(X_inputs={"input_gen_noise": noise, "input_disc_noise": noise, "input_disc_real": real},
        Y_targets={"target_gen": real_y, "target_disc_fake": fake_y, "target_disc_real": real_y},
        n_epoch=args.steps // 2, shuffle=False)
print("trained", flush=True)
