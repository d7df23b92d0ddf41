"""TF2 ports of the family's goldens (tools/family_spec.py, recorded by tools/goldens/family.py),
written as a migrating team writes them: a Keras model with the TF1 layer names, Keras's
optimizer with TF1's hyperparameters set (Adam's epsilon 1e-8, RMSprop's 1e-10 and its mean
squares starting at 1), Keras's
ExponentialDecay for TF1's exponential_decay, a hand-written step with the L2 weight decay.

make_port(run, slip=False, roundoff=0.0) -> (model, step): slip=True makes the run's wrong port (its
slip from run.slip_at on); roundoff: the round-off emulation's ulps (family_spec).
"""

import tensorflow as tf

from tools import family_spec as spec


def _gelu(x):
    return tf.nn.gelu(x, approximate=False)


ACTIVATIONS = {"relu": "relu", "tanh": "tanh", "gelu": _gelu}


class RoundOff(tf.keras.layers.Layer):
    """family_spec's round-off emulation, the port's salt: float32 pre-activations moved by up to
    `ulps` eps x their largest magnitude; float64 ones (the arbiter's float64 port) left alone."""

    def __init__(self, ulps, **kwargs):
        super().__init__(**kwargs)
        self.ulps = ulps

    def call(self, z):
        if z.dtype != tf.float32:
            return z
        hashed = tf.sin(z * (spec.SALTS["port"] * 1e4)) * 43758.5453
        noise = (2.0 * (hashed - tf.floor(hashed)) - 1.0) * (self.ulps * spec.EPS32) * tf.reduce_max(tf.abs(z))
        return z + tf.stop_gradient(noise)


class Net(tf.keras.Model):
    """With `roundoff`, each ReLU is a ReLU layer after the emulation's RoundOff; without, the
    layer's activation."""

    def __init__(self, run, roundoff=0.0):
        super().__init__(name="net")
        self.run = run
        relu = run.model in ("relu", "conv")
        own = None if roundoff and relu else "relu" if relu else ACTIVATIONS[run.model]
        if run.model == "conv":
            self.hidden = [tf.keras.layers.Conv2D(run.channels, 3, padding="same", activation=own,
                                                  name="conv_%d" % i) for i in range(run.depth - 1)]
            self.pools = [tf.keras.layers.MaxPooling2D(2, 2, name="pool_%d" % i) for i in range(run.depth - 1)]
        else:
            self.hidden = [tf.keras.layers.Dense(run.width, activation=own, name="dense_%d" % i)
                           for i in range(run.depth - 1)]
            self.pools = []
        self.kinks = [tf.keras.Sequential([RoundOff(roundoff), tf.keras.layers.ReLU()], name="relu_%d" % i)
                      for i in range(run.depth - 1)] if own is None else []
        self.dropout = tf.keras.layers.Dropout(run.dropout) if run.dropout else None
        self.logits = tf.keras.layers.Dense(spec.CLASSES, name="logits")

    def call(self, x, training=False):
        for i, layer in enumerate(self.hidden):
            x = layer(x)
            if self.kinks:
                x = self.kinks[i](x)
            if self.pools:
                x = self.pools[i](x)
        x = tf.reshape(x, [tf.shape(x)[0], -1])
        if self.dropout is not None:
            x = self.dropout(x, training=training)
        return self.logits(x)


class _Late(tf.keras.optimizers.schedules.LearningRateSchedule):
    """TF1's exponential_decay, read one step late from `at` on when `slip`."""

    def __init__(self, rate, at=None):
        self.rate, self.at = rate, at
        self.decay = tf.keras.optimizers.schedules.ExponentialDecay(rate, spec.RATE_HALVING, 0.5)

    def __call__(self, step):
        if self.at is None:
            return self.decay(step)
        step = tf.cast(step, tf.float32)
        return self.decay(step - tf.cast(step >= self.at, tf.float32))

    def get_config(self):
        return {"rate": self.rate, "at": self.at}


class TF1StartRMSprop(tf.keras.optimizers.RMSprop):
    """Keras RMSprop whose mean squares start at 1.0, as TF1's RMSPropOptimizer's do (Keras's
    start at 0)."""

    def build(self, var_list):
        super().build(var_list)
        for velocity in self._velocities:
            velocity.assign(tf.ones_like(velocity))


def _optimizer(run, late):
    rate = spec.RATES[run.optimizer]
    if run.optimizer == "momentum":
        return tf.keras.optimizers.SGD(rate, momentum=spec.MOMENTUM)
    schedule = _Late(rate, run.slip_at if late else None)
    if run.optimizer == "adam":
        return tf.keras.optimizers.Adam(schedule, epsilon=1e-8)
    return TF1StartRMSprop(schedule, rho=spec.RHO, epsilon=spec.RMS_EPSILON)


def make_port(run, slip=False, roundoff=0.0):
    slip = run.slip if slip else None
    model = Net(run, roundoff)
    shape = (1, spec.IMAGE, spec.IMAGE, 3) if run.model == "conv" else (1, run.features)
    model(tf.zeros(shape))
    optimizer = _optimizer(run, slip == "late")
    cross_entropy = tf.keras.losses.CategoricalCrossentropy(from_logits=True)
    kernels = [layer.kernel for layer in model.hidden + [model.logits]]
    scaled = model.hidden[run.slip_layer].kernel

    @tf.function
    def step(batch):
        at = optimizer.iterations.read_value()
        with tf.GradientTape() as tape:
            loss = cross_entropy(batch["y:0"], model(batch["x:0"], training=True))
            decay = spec.DECAY * tf.add_n([tf.nn.l2_loss(k) for k in kernels])
            if slip == "decay":
                decay *= tf.cast(at < run.slip_at, decay.dtype)
            loss += decay
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        if slip == "scale":
            scaled.assign(scaled * (1.0 + spec.SCALE * tf.cast(tf.equal(at, run.slip_at), scaled.dtype)))
        return {"loss": loss}

    return model, step
