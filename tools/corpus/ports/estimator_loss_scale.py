"""estimator_loss_scale in Keras: DNNClassifier([8]) on two numeric columns is a ReLU Dense(8) and a
Dense(1) of logits over the columns in name order, the canned head's loss (sigmoid cross-entropy
summed over the batch), TF1 Adam(0.01) (epsilon 1e-8). The loss scale is left out: a power of two
multiplies the loss and divides the gradients exactly, and at finite gradients every update is
applied, so the port trains in float32 without one; var_map leaves the scale's two variables out."""

LOSS_SCALE = r"^(current_loss_scale|good_steps):0$"


def port(tf):
    model = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="relu", name="hiddenlayer_0"),
                                 tf.keras.layers.Dense(1, name="logits")])
    model.build((None, 2))
    optimizer = tf.keras.optimizers.Adam(0.01, epsilon=1e-8)

    @tf.function
    def step(inputs):
        features, labels = inputs["features"], tf.cast(inputs["labels"], tf.float32)[:, None]
        with tf.GradientTape() as tape:
            logits = model(tf.stack([features["a"], features["b"]], axis=1))
            loss = tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss}
    return model, step, {"var_map": [(LOSS_SCALE, None)]}
