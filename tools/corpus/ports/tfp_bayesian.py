"""tfp_bayesian in Keras: DenseReparameterization written out as a layer with the same three
variables (TFP's names), a kernel drawn from its posterior at every step (loc + scale * a
standard normal draw of shape (1, in, out), as TFP's Normal.sample draws; the replay hands the
golden's draw to tf.random.normal), TFP's posterior scale (float32 eps + softplus), and the
analytic KL divergence to the standard normal prior, as TFP computes it."""

import numpy as np


def port(tf):
    class Bayes(tf.keras.layers.Layer):
        def build(self, shape):
            units = (int(shape[-1]), 3)
            self.kernel_posterior_loc = self.add_weight(name="kernel_posterior_loc", shape=units)
            self.kernel_posterior_untransformed_scale = self.add_weight(name="kernel_posterior_untransformed_scale",
                                                                        shape=units)
            self.bias_posterior_loc = self.add_weight(name="bias_posterior_loc", shape=(3,))

        def call(self, x):
            loc = self.kernel_posterior_loc
            scale = np.finfo(np.float32).eps + tf.nn.softplus(self.kernel_posterior_untransformed_scale)
            kernel = (tf.random.normal([1] + loc.shape.as_list()) * scale + loc)[0]
            log_scale = tf.math.log(scale) - tf.math.log(1.0)
            kl = 0.5 * tf.math.squared_difference(loc / 1.0, 0.0) + 0.5 * tf.math.expm1(2.0 * log_scale) - log_scale
            self.add_loss(tf.reduce_sum(kl))
            return tf.nn.bias_add(tf.matmul(x, kernel), self.bias_posterior_loc)

    model = tf.keras.Sequential([Bayes(name="bayes")])
    model.build((None, 5))
    optimizer = tf.keras.optimizers.Adam(0.01, epsilon=1e-8)

    @tf.function
    def step(inputs):
        with tf.GradientTape() as tape:
            logits = model(inputs["x:0"])
            nll = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=inputs["y:0"], logits=logits))
            loss = nll + tf.add_n(model.losses) / 64.0
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss}
    return model, step, {}
