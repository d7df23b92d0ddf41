"""estimator_linear in Keras: the vocabulary column is a StringLookup, the bucketized column a
Discretization, each one-hot into a LinearModel (one weight per feature, as the canned model
has; its dict keys are the TF1 column names), FTRL at the canned model's 0.2, and the canned
head's loss: sigmoid cross-entropy summed over the batch."""

CITIES = ["oslo", "lima", "pune"]


def port(tf):
    lookup = tf.keras.layers.StringLookup(vocabulary=CITIES, num_oov_indices=0)
    buckets = tf.keras.layers.Discretization(bin_boundaries=[-1.0, 0.0, 1.0])
    linear = tf.keras.experimental.LinearModel(units=1, name="linear_model")

    def logits(features):
        return linear({"age_bucketized": tf.one_hot(buckets(features["age"]), 4),
                       "city": tf.one_hot(lookup(features["city"]), len(CITIES))})
    logits({"age": tf.zeros([1]), "city": tf.constant(["oslo"])})
    optimizer = tf.keras.optimizers.Ftrl(0.2)

    @tf.function
    def step(inputs):
        labels = tf.cast(inputs["labels"], tf.float32)[:, None]
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels,
                                                                         logits=logits(inputs["features"])))
        grads = tape.gradient(loss, linear.trainable_variables)
        optimizer.apply_gradients(zip(grads, linear.trainable_variables))
        return {"loss": loss}
    return linear.trainable_variables, step, {}
