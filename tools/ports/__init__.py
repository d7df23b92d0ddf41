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


# The distribution slips a port under tf.distribute can make (distributed_step's `slip`).
SLIPS = ("loss averaged per replica", "regularization not scaled", "gradients all-reduced twice",
         "gradients not all-reduced")


def distributed_step(strategy, model, optimizer, per_example_loss, global_batch_size, x="x:0", y="y:0",
                     regularization=False, jit=True, slip=None):
    """A custom training loop's distributed step, as the TF2 distribution guide writes it: each
    replica averages its per-example losses over the global batch (tf.nn.compute_average_loss),
    adds its share of the regularization loss (tf.nn.scale_regularization_loss), and the optimizer
    all-reduces the gradients; the step returns the loss summed over replicas. `slip` names one
    of SLIPS, for the deliberately wrong ports the tests must catch."""
    import tensorflow as tf

    if slip is not None and slip not in SLIPS:
        raise ValueError("unknown slip %r" % (slip,))

    def replica_step(inputs):
        with tf.GradientTape() as tape:
            losses = per_example_loss(inputs[y], model(inputs[x], training=True))
            if slip == "loss averaged per replica":
                loss = tf.reduce_mean(losses)
            else:
                size = global_batch_size
                if size is None:  # the rows the replicas hold together: a partial last batch counts what it has
                    rows = tf.cast(tf.shape(losses)[0], tf.int64)
                    size = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, rows)
                loss = tf.nn.compute_average_loss(losses, global_batch_size=size)
            if regularization:
                penalty = tf.add_n(model.losses)
                loss += penalty if slip == "regularization not scaled" else tf.nn.scale_regularization_loss(penalty)
        grads = tape.gradient(loss, model.trainable_variables)
        context = tf.distribute.get_replica_context()
        if slip == "gradients all-reduced twice":
            grads = context.all_reduce(tf.distribute.ReduceOp.SUM, grads)
        aggregate = {"experimental_aggregate_gradients": False} if slip == "gradients not all-reduced" else {}
        optimizer.apply_gradients(zip(grads, model.trainable_variables), **aggregate)
        return loss

    def step(inputs):
        losses = strategy.run(replica_step, args=(inputs,))
        return {"loss": strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)}

    return tf.function(step) if jit else step


def example_port(golden):
    """make_port for the shipped golden `golden` (goldens/<golden>.h5): a function returning
    (model, step, replay options), as tracekit.tf2.calibrate and localize take it. The options
    name the port's own objects: weight conversions (the RNNs), variables (no single model)."""
    from . import estimator_model, gan_model, keras_fit, momentum_model, rnn_model, seed_example, slim_resnet, \
        two_optimizers

    def plain(make):
        return lambda: make() + ({},)

    def rnn(cell):
        def make():
            model, step = rnn_model.make(cell)
            return model, step, {"convert": rnn_model.conversions(model, cell)}
        return make

    def two():
        model, step, ema = two_optimizers.make()
        return None, step, {"variables": two_optimizers.variables(model, ema)}

    def gan():
        models, steps = gan_model.make()
        return None, steps, {"variables": gan_model.variables(models)}

    ports = {"seed_example": plain(seed_example.make), "estimator_model": plain(estimator_model.make),
             "slim_resnet": plain(slim_resnet.make), "lstm_model": rnn("lstm"), "gru_model": rnn("gru"),
             "two_optimizers": two, "keras_fit": plain(keras_fit.make), "momentum_model": plain(momentum_model.make),
             "gan_model": gan}
    if golden not in ports:
        raise KeyError("no port of a shipped golden %r; the shipped ones: %s" % (golden, ", ".join(ports)))
    return ports[golden]


EXAMPLES = ("seed_example", "estimator_model", "slim_resnet", "lstm_model", "gru_model", "two_optimizers",
            "keras_fit", "momentum_model", "gan_model")  # the shipped goldens, each with example_port
