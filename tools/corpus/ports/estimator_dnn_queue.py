"""estimator_dnn_queue in Keras: DNNClassifier([4]) on two numeric columns is a ReLU Dense(4)
and a Dense(1) of logits over the columns in name order, Adagrad at the canned DNN's 0.05
(TF1's AdagradOptimizer: initial accumulator 0.1, no epsilon; Keras adds 1e-7 to its root), and
the canned head's loss: sigmoid cross-entropy summed over the batch."""


def port(tf):
    model = tf.keras.Sequential([tf.keras.layers.Dense(4, activation="relu", name="hiddenlayer_0"),
                                 tf.keras.layers.Dense(1, name="logits")])
    model.build((None, 2))
    optimizer = tf.keras.optimizers.Adagrad(0.05, initial_accumulator_value=0.1)

    @tf.function
    def step(inputs):
        features, labels = inputs["features"], tf.cast(inputs["labels"], tf.float32)[:, None]
        with tf.GradientTape() as tape:
            logits = model(tf.stack([features["a"], features["b"]], axis=1))
            loss = tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss}
    return model, step, {}
