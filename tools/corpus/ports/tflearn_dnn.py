"""tflearn_dnn in Keras: fully_connected layers are Dense (tflearn names their weights W and b),
tflearn.regression's categorical_crossentropy of a softmax output normalizes the probabilities
again and clips them to [1e-10, 1 - 1e-10] (Keras' crossentropy clips to [1e-7, 1 - 1e-7]: written
out here as tflearn has it), gradients clipped to a global norm of 5 (tflearn's TrainOp default),
Adam(0.01) with tflearn's epsilon 1e-8. tflearn's bookkeeping variables (its step counters, validation
results, the moving averages its summaries show, is_training) have no place in a Keras model:
var_map leaves them out."""

BOOKKEEPING = r"^(is_training|Training_step|Global_Step|val_loss|val_acc|.*/moving_avg):0$"


def port(tf):
    model = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="relu", name="hidden"),
                                 tf.keras.layers.Dense(2, activation="softmax", name="out")])
    model.build((None, 6))
    optimizer = tf.keras.optimizers.Adam(0.01, epsilon=1e-8)

    @tf.function
    def step(inputs):
        with tf.GradientTape() as tape:
            probabilities = model(inputs["x/X:0"])
            probabilities /= tf.reduce_sum(probabilities, axis=1, keepdims=True)
            probabilities = tf.clip_by_value(probabilities, 1e-10, 1.0 - 1e-10)
            loss = tf.reduce_mean(-tf.reduce_sum(inputs["target/Y:0"] * tf.math.log(probabilities), axis=1))
        grads, _ = tf.clip_by_global_norm(tape.gradient(loss, model.trainable_variables), 5.0)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss}
    return model, step, {"var_map": [(BOOKKEEPING, None)]}
