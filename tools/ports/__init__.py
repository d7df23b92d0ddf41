"""TF2 ports of the example goldens, written as a user would port them."""


def supervised_step(model, optimizer, loss_fn, jit=True):
    """The usual hand-written training step on the golden's inputs x:0 and y:0: the loss of the
    model's output, its gradients, one optimizer update; a tf.function unless jit=False."""
    import tensorflow as tf

    def step(inputs):
        with tf.GradientTape() as tape:
            loss = loss_fn(inputs["y:0"], model(inputs["x:0"]))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss}

    return tf.function(step) if jit else step
