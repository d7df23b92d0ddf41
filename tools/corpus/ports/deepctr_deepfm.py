"""deepctr_deepfm in Keras, written out as deepctr's DeepFM computes it: embeddings for the FM
and the DNN (4 wide) and for the linear part (1 wide), deepctr's Linear (the sparse weights
summed, a kernel for the dense feature), the factorization machine's pairwise term, a ReLU DNN
and a bias-free logit, PredictionLayer's global bias and sigmoid; L2 of 1e-5 on the embeddings
and the linear kernel, Keras' binary cross-entropy (of the logits: TF1 Keras takes them from
the sigmoid), Adam at Keras' defaults. The layers carry deepctr's names. deepctr also makes a
second set of linear embeddings (linearsparse_emb_*) it never uses: var_map leaves them out, as
it does the TF1 Keras optimizer's hyperparameter variables."""

UNUSED = r"^(linearsparse_emb_c[12]/embeddings|training/Adam/(beta_1|beta_2|decay|learning_rate)):0$"
SPARSE = {"c1": 5, "c2": 7}


def port(tf):
    l2 = tf.keras.regularizers.l2(1e-5)

    class Weights(tf.keras.layers.Layer):
        """A layer holding deepctr's named weights (Linear's kernel, DNN's kernel0/bias0, the global bias)."""

        def __init__(self, shapes, regularizers=None, **kwargs):
            super().__init__(**kwargs)
            self.shapes, self.regularizers = shapes, regularizers or {}

        def build(self, _):
            for name, shape in self.shapes.items():
                setattr(self, name, self.add_weight(name=name, shape=shape, regularizer=self.regularizers.get(name)))

    embed = {c: tf.keras.layers.Embedding(n, 4, embeddings_regularizer=l2, name="sparse_emb_" + c)
             for c, n in SPARSE.items()}
    linear_embed = {c: tf.keras.layers.Embedding(n, 1, embeddings_regularizer=l2, name="linear0sparse_emb_" + c)
                    for c, n in SPARSE.items()}
    linear = Weights({"linear_kernel": (1, 1)}, {"linear_kernel": l2}, name="linear")
    dnn = Weights({"kernel0": (9, 8), "bias0": (8,)}, name="dnn")
    dnn_logit = tf.keras.layers.Dense(1, use_bias=False, name="dense")
    prediction = Weights({"global_bias": (1,)}, name="prediction_layer")
    layers = list(embed.values()) + list(linear_embed.values()) + [linear, dnn, dnn_logit, prediction]

    def logit(inputs):
        ids = {c: inputs[c + "_1:0"] for c in SPARSE}
        dense = inputs["d1_1:0"]
        emb = tf.concat([embed[c](ids[c]) for c in SPARSE], axis=1)  # (batch, 2, 4)
        sparse_linear = tf.reduce_sum(tf.concat([linear_embed[c](ids[c]) for c in SPARSE], axis=-1), axis=-1)
        linear_logit = sparse_linear + tf.tensordot(dense, linear.linear_kernel, axes=(-1, 0))
        square_of_sum = tf.square(tf.reduce_sum(emb, axis=1, keepdims=True))
        sum_of_square = tf.reduce_sum(emb * emb, axis=1, keepdims=True)
        fm_logit = 0.5 * tf.reduce_sum(square_of_sum - sum_of_square, axis=2)
        hidden = tf.concat([tf.keras.layers.Flatten()(emb), dense], axis=-1)
        hidden = tf.nn.relu(tf.nn.bias_add(tf.tensordot(hidden, dnn.kernel0, axes=(-1, 0)), dnn.bias0))
        return tf.nn.bias_add(linear_logit + fm_logit + dnn_logit(hidden), prediction.global_bias)

    for layer in (linear, dnn, prediction):
        layer.build(None)
    logit({"c1_1:0": tf.zeros([1, 1], tf.int32), "c2_1:0": tf.zeros([1, 1], tf.int32), "d1_1:0": tf.zeros([1, 1])})
    variables = [v for layer in layers for v in layer.trainable_variables]
    optimizer = tf.keras.optimizers.Adam()

    @tf.function
    def step(inputs):
        with tf.GradientTape() as tape:
            per_row = tf.nn.sigmoid_cross_entropy_with_logits(labels=inputs["prediction_layer_target:0"],
                                                              logits=logit(inputs))
            loss = tf.reduce_mean(tf.reduce_mean(per_row, axis=-1)) + tf.add_n([l for y in layers for l in y.losses])
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(grads, variables))
        return {"loss": loss}
    return variables, step, {"var_map": [(UNUSED, None)]}
