"""TF2 ports of the long goldens (tools/goldens/long_models.py), written as a user would port
them; each `make_*` returns (model, step) and takes `slip=`, a mistake that only shows late,
for the wrong ports the tests must catch (None: the right port).

Slips: "nudge" moves one weight by 1e-3 at step NUDGE_AT (or nudge_at=); "scale" (mlp) multiplies the
second hidden layer's kernel (the first, in a one-layer net) by 1 + 1e-3 after step NUDGE_AT's update;
"schedule" (mlp) decays the learning
rate from step 100 over 500 steps instead of 1000; "late" (mlp) starts the decay one step late (its
schedule off by one, a step counted from 1); "decay" (mlp) leaves out the weight decay the golden
adds from its warm-up's end; "epsilon" (mlp) keeps Keras Adam's default epsilon (1e-7; TF1's is 1e-8);
"adamw" (mlp) takes Keras AdamW, whose default weight decay (0.004 x the learning rate) TF1's Adam lacks.
"""

import tensorflow as tf

import tracekit

CLASSES = 10
NUDGE_AT = 150
SLIPS = ("nudge", "scale", "schedule", "late", "decay", "epsilon", "adamw")


class _Rate(tf.keras.optimizers.schedules.LearningRateSchedule):
    """TF1's polynomial_decay(1e-3, max(step - decay_from, 0), decay_steps, 0.0)."""

    def __init__(self, decay_steps=1000, decay_from=100):
        self.decay_steps, self.decay_from = decay_steps, decay_from

    def __call__(self, step):
        done = tf.minimum(tf.maximum(tf.cast(step, tf.float32) - float(self.decay_from), 0.0), float(self.decay_steps))
        return 1e-3 * (1.0 - done / self.decay_steps)

    def get_config(self):
        return {"decay_steps": self.decay_steps, "decay_from": self.decay_from}


def _nudged(variable, step, slip, at):
    """The "nudge" slip: one element of `variable` moved by 1e-3 in step `at`."""
    if slip != "nudge":
        return
    delta = tf.cast(tf.equal(step, at), variable.dtype) * 1e-3
    index = [[0] * len(variable.shape)]
    variable.assign_add(tf.scatter_nd(index, tf.reshape(delta, [1]), variable.shape))


def _check(slip, allowed):
    if slip is not None and slip not in allowed:
        raise ValueError("unknown slip %r (this port knows %s)" % (slip, ", ".join(allowed)))


class MLP(tf.keras.Model):
    def __init__(self, hidden, layers, activation="relu"):
        super().__init__(name="mlp")
        self.dense = [tf.keras.layers.Dense(hidden, activation=activation, name="dense_%d" % i) for i in range(layers)]
        self.logits = tf.keras.layers.Dense(CLASSES, name="logits")

    def call(self, x, training=False):
        for i, layer in enumerate(self.dense):
            x = tracekit.tap("hidden%d" % i, layer(x))
        return tracekit.tap("logits", self.logits(x))


def make_mlp(slip=None, features=784, hidden=128, layers=3, nudge_at=NUDGE_AT, activation="relu", decay_from=100):
    _check(slip, SLIPS)
    model = MLP(hidden, layers, activation)
    model(tf.zeros((1, features)))
    dense = model.dense
    logits = model.logits
    rate = _Rate(500 if slip == "schedule" else 1000, decay_from + (slip == "late"))
    optimizer = tf.keras.optimizers.AdamW(rate, epsilon=1e-8) if slip == "adamw" else \
        tf.keras.optimizers.Adam(rate, epsilon=1e-7 if slip == "epsilon" else 1e-8)
    cross_entropy = tf.keras.losses.CategoricalCrossentropy(from_logits=True)
    kernels = [layer.kernel for layer in dense + [logits]]

    @tf.function
    def step(batch):
        at = optimizer.iterations.read_value()
        with tf.GradientTape() as tape:
            loss = cross_entropy(batch["y:0"], model(batch["x:0"], training=True))
            if slip != "decay":  # TF1 added 1e-4 * sum(l2_loss(kernel)) from step 20 on
                on = tf.cast(at >= 20, loss.dtype)
                loss += 1e-4 * on * tf.add_n([tf.nn.l2_loss(k) for k in kernels])
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        _nudged(dense[0].kernel, at, slip, nudge_at)
        if slip == "scale":
            scaled = dense[min(1, len(dense) - 1)].kernel
            scaled.assign(scaled * (1.0 + 1e-3 * tf.cast(tf.equal(at, nudge_at), scaled.dtype)))
        return {"loss": loss}

    return model, step


def _supervised(model, slip, nudge_at=NUDGE_AT):
    optimizer = tf.keras.optimizers.Adam(1e-3, epsilon=1e-8)
    cross_entropy = tf.keras.losses.CategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(batch):
        at = optimizer.iterations.read_value()
        with tf.GradientTape() as tape:
            loss = cross_entropy(batch["y:0"], model(batch["x:0"], training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        _nudged(model.trainable_variables[0], at, slip, nudge_at)
        return {"loss": loss}

    return step


class Conv(tf.keras.Model):
    def __init__(self):
        super().__init__(name="conv")
        self.conv1 = tf.keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="conv1")
        self.pool1 = tf.keras.layers.MaxPooling2D(2, 2)
        self.conv2 = tf.keras.layers.Conv2D(16, 3, padding="same", activation="relu", name="conv2")
        self.pool2 = tf.keras.layers.MaxPooling2D(2, 2)
        self.dropout = tf.keras.layers.Dropout(0.25)
        self.logits = tf.keras.layers.Dense(CLASSES, name="logits")

    def call(self, x, training=False):
        h = tracekit.tap("pool1", self.pool1(tracekit.tap("conv1", self.conv1(x))))
        h = tracekit.tap("pool2", self.pool2(tracekit.tap("conv2", self.conv2(h))))
        h = self.dropout(tf.reshape(h, [-1, 2 * 2 * 16]), training=training)
        return tracekit.tap("logits", self.logits(h))


def make_conv(slip=None):
    _check(slip, ("nudge",))
    model = Conv()
    model(tf.zeros((1, 8, 8, 3)))
    return model, _supervised(model, slip)


class Recurrent(tf.keras.Model):
    def __init__(self):
        super().__init__(name="recurrent")
        self.lstm = tf.keras.layers.LSTM(32, unit_forget_bias=False, name="lstm")
        self.logits = tf.keras.layers.Dense(CLASSES, name="logits")

    def call(self, x, training=False):
        return tracekit.tap("logits", self.logits(tracekit.tap("last", self.lstm(x))))


def make_lstm(slip=None):
    """The Keras LSTM holds TF1's LSTMCell weights in another layout: replay with
    convert=[tracekit.tf2.lstm("rnn/lstm_cell", model.lstm)] (the third item returned)."""
    _check(slip, ("nudge",))
    import tracekit.tf2

    model = Recurrent()
    model(tf.zeros((1, 12, 8)))
    return model, _supervised(model, slip), {"convert": [tracekit.tf2.lstm("rnn/lstm_cell", model.lstm)]}


MAKERS = {"mlp": make_mlp, "conv": make_conv, "lstm": make_lstm}
