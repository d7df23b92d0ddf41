"""TF2 port of the benchmark MLPs (tools/mlp_data.py): Dense layers with ReLU, sparse softmax
cross-entropy, Adam with TF1's epsilon, a hand-written train step. Also the plain training
loop the replay benchmark measures tracekit against, and the port of the many-scalars golden."""

import tensorflow as tf

import tracekit
from tools.ports import supervised_step


class MLP(tf.keras.Model):
    def __init__(self, hidden, classes=10):
        super().__init__(name="mlp")
        self.hidden = [tf.keras.layers.Dense(units, tf.nn.relu, name="dense_%d" % i) for i, units in enumerate(hidden)]
        self.logits = tf.keras.layers.Dense(classes, name="logits")

    def call(self, x):
        for i, layer in enumerate(self.hidden):
            x = tracekit.tap("hidden%d" % i, layer(x))
        return self.logits(x)


def _built(hidden, features):
    """The model (built), its Adam with TF1's epsilon, and the loss, as the golden has them."""
    model = MLP(hidden)
    model(tf.zeros((1, features)))
    optimizer = tf.keras.optimizers.Adam(1e-3, epsilon=1e-8)
    return model, optimizer, tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def make(hidden, features=784, jit=True):
    """(model, step) for the golden of these hidden layer sizes."""
    model, optimizer, loss_fn = _built(hidden, features)
    return model, supervised_step(model, optimizer, loss_fn, jit=jit)


def make_floor(hidden, features=784):
    """The same model and step for the replay benchmark's floor: the step returns its gradients
    as well, so the benchmark copies out exactly what a full capture copies (model, optimizer, step)."""
    model, optimizer, loss_fn = _built(hidden, features)

    @tf.function
    def step(inputs):
        with tf.GradientTape() as tape:
            loss = loss_fn(inputs["y:0"], model(inputs["x:0"]))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss, grads

    return model, optimizer, step


def make_many(count=4000):
    """The many-scalars golden's port: one scalar variable per input feature, plain SGD."""
    weights = [tf.Variable(0.5, name="w%04d" % i) for i in range(count)]
    optimizer = tf.keras.optimizers.SGD(1e-3)

    @tf.function
    def step(inputs):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(tf.stack(weights) * inputs["x:0"] - 1.0))
        optimizer.apply_gradients(zip(tape.gradient(loss, weights), weights))
        return {"loss": loss}

    return weights, step
