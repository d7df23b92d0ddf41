"""tfp_vae in Keras, without TFP: the encoder's and decoder's Dense layers under the program's
names, the posterior's scale as TFP's MultivariateNormalDiag gets it (softplus(raw - 1) + 1e-5), the
code drawn by reparameterization (loc + scale * a standard normal draw of all 16 x 3 values at once,
as TFP draws it: the replay hands the golden's draw to tf.random.normal), the Bernoulli
log-likelihood as a negative sigmoid cross-entropy summed over the pixels, the KL divergence to
the standard normal prior written out (log-determinant, trace and mean terms), Adam(0.01) with
TF1's epsilon."""


def port(tf):
    layers = tf.keras.layers
    encoder = tf.keras.Sequential([layers.Dense(16, activation="softplus", name="hidden"),
                                   layers.Dense(6, name="params")], name="encoder")
    decoder = tf.keras.Sequential([layers.Dense(16, activation="softplus", name="hidden"),
                                   layers.Dense(12, name="logits")], name="decoder")
    encoder.build((None, 12))
    decoder.build((None, 3))
    variables = encoder.trainable_variables + decoder.trainable_variables
    optimizer = tf.keras.optimizers.Adam(0.01, epsilon=1e-8)

    @tf.function
    def step(inputs):
        x = inputs["x:0"]
        with tf.GradientTape() as tape:
            params = encoder(x)
            loc, scale = params[:, :3], tf.nn.softplus(params[:, 3:] - 1.0) + 1e-5
            code = loc + scale * tf.reshape(tf.random.normal([tf.size(loc)]), tf.shape(loc))
            logits = decoder(code)
            likelihood = -tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(labels=x, logits=logits), axis=1)
            kl = -tf.reduce_sum(tf.math.log(scale), axis=1) + 0.5 * (
                -3.0 + tf.reduce_sum(tf.square(scale), axis=1) + tf.reduce_sum(tf.square(loc), axis=1))
            loss = -tf.reduce_mean(likelihood - kl)
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(grads, variables))
        return {"loss": loss}
    return variables, step, {}
