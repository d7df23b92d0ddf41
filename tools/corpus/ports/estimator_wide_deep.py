"""estimator_wide_deep in Keras, as a team ports a DNNLinearCombinedClassifier today: StringLookup
and HashedCrossing preprocessing, a LinearModel over the one-hot features (one weight per TF1
column, its dict keys the column names), an Embedding for the embedding column, ReLU Dense
layers named like the canned DNN's, Keras Ftrl for the linear part and Adagrad for the DNN at
the canned model's rates (0.005, 0.001), and the canned head's loss: sigmoid cross-entropy
summed over the batch. The step reads the Estimator's features and labels by name.
With linear="embeddings" the wide part is what another team writes: an Embedding of one unit per
categorical column, a bias-free Dense for the numeric one and a bias of its own, named after
the columns (`linear_color`, ...), which var_map="auto" pairs by their shared name words."""

COLORS = ["red", "green", "blue", "black"]  # the driver's vocabularies
SHAPES = ["circle", "square", "star"]


def _optimizers(tf, family, ftrl_lr, adagrad_lr, initial_accumulator_value, l2):
    """Ftrl and Adagrad of Keras (new or legacy) or tf.compat.v1.train, as a port may choose."""
    if family == "v1":
        train = tf.compat.v1.train
        return (train.FtrlOptimizer(ftrl_lr, l2_regularization_strength=l2),
                train.AdagradOptimizer(adagrad_lr, initial_accumulator_value=initial_accumulator_value))
    keras = tf.keras.optimizers.legacy if family == "legacy" else tf.keras.optimizers
    return (keras.Ftrl(ftrl_lr, l2_regularization_strength=l2),
            keras.Adagrad(adagrad_lr, initial_accumulator_value=initial_accumulator_value))


def port(tf, ftrl_first=True, ftrl_lr=0.005, adagrad_lr=0.001, initial_accumulator_value=0.1, l2=0.0,
         reduce=None, cross_order=(0, 1), family="keras", hidden=4, linear="model",
         wide_names=("linear_color", "linear_color_X_shape", "linear_size", "linear_bias")):
    """The port; its options are the slips tests/replay/test_wide_deep.py makes on purpose."""
    reduce = reduce or tf.reduce_sum  # the TF1 canned estimators' head sums the batch's losses

    class WideDeep(tf.keras.Model):
        def __init__(self):
            super().__init__()
            self.color = tf.keras.layers.StringLookup(vocabulary=COLORS, num_oov_indices=0)
            self.shape = tf.keras.layers.StringLookup(vocabulary=SHAPES, num_oov_indices=0)
            self.cross = tf.keras.layers.HashedCrossing(num_bins=16)
            if linear == "model":
                self.linear = tf.keras.experimental.LinearModel(units=1, name="linear_model")
            else:
                self.linear = Wide(name="wide")
            self.shape_embedding = tf.keras.layers.Embedding(len(SHAPES), 3, name="shape_embedding")
            self.hidden = tf.keras.layers.Dense(hidden, activation="relu", name="hiddenlayer_0")
            self.logits = tf.keras.layers.Dense(1, name="logits")

        def call(self, features):
            ids = (self.color(features["color"]), self.shape(features["shape"]))
            size, weight = features["size"][:, None], features["weight"][:, None]
            crossed = self.cross(tuple(ids[i] for i in cross_order))
            wide = self.linear({"color": tf.one_hot(ids[0], len(COLORS)), "color_X_shape": tf.one_hot(crossed, 16),
                                "size": size})
            deep = self.logits(self.hidden(tf.concat([self.shape_embedding(ids[1]), size, weight], axis=1)))
            return wide, deep

    class Wide(tf.keras.layers.Layer):
        """The linear model as Embedding rows of one unit per column, summed with a bias."""

        def __init__(self, name):
            super().__init__(name=name)
            self.color = tf.keras.layers.Embedding(len(COLORS), 1, name=wide_names[0])
            self.crossed = tf.keras.layers.Embedding(16, 1, name=wide_names[1])
            self.size = tf.keras.layers.Dense(1, use_bias=False, name=wide_names[2])

        def build(self, _):
            self.bias = self.add_weight(name=wide_names[3], shape=(1,), initializer="zeros")

        def call(self, one_hot):
            color = self.color(tf.argmax(one_hot["color"], axis=1))
            crossed = self.crossed(tf.argmax(one_hot["color_X_shape"], axis=1))
            return color + crossed + self.size(one_hot["size"]) + self.bias

    model = WideDeep()
    model({"color": tf.constant(["red"]), "shape": tf.constant(["star"]), "size": tf.zeros([1]),
           "weight": tf.zeros([1])})
    wide_vars = model.linear.trainable_variables
    deep_vars = [v for layer in (model.shape_embedding, model.hidden, model.logits) for v in layer.trainable_variables]
    ftrl, adagrad = _optimizers(tf, family, ftrl_lr, adagrad_lr, initial_accumulator_value, l2)

    @tf.function
    def step(inputs):
        labels = tf.cast(inputs["labels"], tf.float32)[:, None]  # the Estimator's features and labels
        with tf.GradientTape() as tape:
            wide, deep = model(inputs["features"])
            loss = reduce(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=wide + deep))
        grads = tape.gradient(loss, wide_vars + deep_vars)
        updates = [(ftrl, zip(grads[:len(wide_vars)], wide_vars)), (adagrad, zip(grads[len(wide_vars):], deep_vars))]
        for optimizer, pairs in (updates if ftrl_first else updates[::-1]):
            optimizer.apply_gradients(pairs)
        return {"loss": loss}
    return model, step, {}


def port_with_embeddings():
    """The port with its wide part as Embeddings (tracekit map's MODULE:FUNCTION form)."""
    import tracekit.tf2

    return port(tracekit.tf2.tf, linear="embeddings")
