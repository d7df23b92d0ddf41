"""sonnet_mlp in Keras: snt.nets.MLP([8, 3]) is two Dense layers (Sonnet names them linear_0,
linear_1, its weights w and b), ReLU between, Adam(0.01) with TF1's epsilon."""


def port(tf):
    model = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="relu", name="linear_0"),
                                 tf.keras.layers.Dense(3, name="linear_1")])
    model.build((None, 6))
    optimizer = tf.keras.optimizers.Adam(0.01, epsilon=1e-8)

    @tf.function
    def step(inputs):
        with tf.GradientTape() as tape:
            logits = model(inputs["x:0"])
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=inputs["y:0"], logits=logits))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss}
    return model, step, {}
