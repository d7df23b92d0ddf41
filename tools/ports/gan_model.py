"""TF2 port of the GAN with alternating train ops (goldens/gan_model.h5): Keras generator and
discriminator, one Keras Adam each, one tf.function per train op. The replay is given
{train op name: step}, and runs the golden's steps through the one its step ran.

`make()` returns (models, steps); its keyword arguments build deliberately wrong ports.
"""

import tensorflow as tf

import tracekit

NOISE = 4


def _dense(units, name, activation=None):
    return tf.keras.layers.Dense(units, activation=activation, name=name)


def make(d_lr=1e-2, g_lr=2e-2, beta_1=0.5, leaky_alpha=0.2, swap=False):
    generator = tf.keras.Sequential([_dense(16, "hidden", "relu"), _dense(2, "out")], name="generator")
    discriminator = tf.keras.Sequential([_dense(16, "hidden", lambda x: tf.nn.leaky_relu(x, leaky_alpha)),
                                         _dense(1, "logit")], name="discriminator")
    generator.build((None, NOISE))
    discriminator.build((None, 2))
    # TF1's AdamOptimizer: epsilon 1e-8 (Keras' default is 1e-7)
    d_adam = tf.keras.optimizers.Adam(d_lr, beta_1=beta_1, epsilon=1e-8)
    g_adam = tf.keras.optimizers.Adam(g_lr, beta_1=beta_1, epsilon=1e-8)
    xent = tf.keras.losses.BinaryCrossentropy(from_logits=True)

    @tf.function
    def d_step(inputs):
        with tf.GradientTape() as tape:
            fake = tracekit.tap("fake", generator(inputs["z:0"]))
            real_score, fake_score = discriminator(inputs["real:0"]), discriminator(fake)
            loss = xent(tf.ones_like(real_score), real_score) + xent(tf.zeros_like(fake_score), fake_score)
        grads = tape.gradient(loss, discriminator.trainable_variables)
        d_adam.apply_gradients(zip(grads, discriminator.trainable_variables))
        return {"loss": loss}

    @tf.function
    def g_step(inputs):
        with tf.GradientTape() as tape:
            fake_score = discriminator(tracekit.tap("fake", generator(inputs["z:0"])))
            loss = xent(tf.ones_like(fake_score), fake_score)
        grads = tape.gradient(loss, generator.trainable_variables)
        g_adam.apply_gradients(zip(grads, generator.trainable_variables))
        return {"loss": loss}

    steps = {"d_adam": g_step, "g_adam": d_step} if swap else {"d_adam": d_step, "g_adam": g_step}
    return (generator, discriminator), steps


def variables(models):
    generator, discriminator = models
    return generator.variables + discriminator.variables
