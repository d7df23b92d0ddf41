"""Keras 2.2.5, standalone, on its TensorFlow 1 backend: a small convolutional classifier in the
shape of Keras' own MNIST example (Conv2D, MaxPooling2D, Dropout, Flatten, Dense) compiled with
Keras' Adam (its own optimizer: hand-written assign updates of its moments, its iteration counter
and its learning rate as backend variables) and trained by Model.fit (Keras' feed loop through
its backend function) on synthetic 8x8 images. argv: --steps N (64 images, batches of 16)."""
import argparse
import os

os.environ["KERAS_BACKEND"] = "tensorflow"
import numpy as np  # noqa: E402
import keras  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=4)
args = parser.parse_args()
np.random.seed(0)  # Keras 2.2 draws an op seed from numpy for every initializer and dropout given none
rng = np.random.RandomState(0)
images = rng.rand(64, 8, 8, 1).astype(np.float32)
labels = keras.utils.to_categorical((images[:, :4].mean(axis=(1, 2, 3)) > 0.5).astype(int), 2)
keras.backend.get_session().graph.seed = 1
model = keras.models.Sequential([
    keras.layers.Conv2D(4, (3, 3), activation="relu", input_shape=(8, 8, 1), name="conv"),
    keras.layers.MaxPooling2D((2, 2), name="pool"),
    keras.layers.Dropout(0.25, name="dropout"),
    keras.layers.Flatten(name="flatten"),
    keras.layers.Dense(8, activation="relu", name="hidden"),
    keras.layers.Dense(2, activation="softmax", name="out")])
model.compile(loss="categorical_crossentropy", optimizer=keras.optimizers.Adam(lr=0.01), metrics=["accuracy"])
model.fit(images[:16 * args.steps], labels[:16 * args.steps], batch_size=16, epochs=1, shuffle=False, verbose=0)
print("trained", flush=True)
