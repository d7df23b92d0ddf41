"""TF1 Keras compile/fit in graph mode (fit reaches the session through make_callable)."""
import numpy as np
import tensorflow as tf

if hasattr(tf.compat.v1, "disable_eager_execution"):
    tf.compat.v1.disable_eager_execution()
tf.compat.v1.set_random_seed(3)
rng = np.random.RandomState(0)
x = rng.randn(64, 5).astype(np.float32)
y = rng.randint(0, 3, 64)
model = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="relu", input_shape=(5,)),
                             tf.keras.layers.Dropout(0.5), tf.keras.layers.Dense(3)])
adam = getattr(tf.keras.optimizers, "legacy", tf.keras.optimizers).Adam  # TF 2 graph-mode fit needs legacy
model.compile(optimizer=adam(0.01), loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
print("fit done")
