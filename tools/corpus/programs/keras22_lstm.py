"""Keras 2.2.5, standalone, on its TensorFlow 1 backend: a word-level LSTM language model (an
Embedding of the tokens, an LSTM returning every position, a softmax over the next token at each)
compiled with Keras' RMSprop (hand-written assign updates; the embedding's gradient, IndexedSlices
from the lookup, made dense by the update's arithmetic) and trained by Model.train_on_batch in the
program's own loop, which prints each batch's loss. argv: --steps N."""
import argparse
import os

os.environ["KERAS_BACKEND"] = "tensorflow"
import numpy as np  # noqa: E402
import keras  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=4)
args = parser.parse_args()
VOCAB, LENGTH = 20, 6
np.random.seed(0)  # Keras 2.2 draws an op seed from numpy for every initializer given none
rng = np.random.RandomState(0)
text = rng.randint(0, VOCAB, 400)
keras.backend.get_session().graph.seed = 1
model = keras.models.Sequential([
    keras.layers.Embedding(VOCAB, 8, input_length=LENGTH, name="embedding"),
    keras.layers.LSTM(16, return_sequences=True, name="lstm"),
    keras.layers.TimeDistributed(keras.layers.Dense(VOCAB, activation="softmax"), name="next_word")])
model.compile(loss="sparse_categorical_crossentropy", optimizer=keras.optimizers.RMSprop(lr=0.01))
for step in range(args.steps):
    starts = rng.randint(0, len(text) - LENGTH - 1, 8)
    x = np.stack([text[s:s + LENGTH] for s in starts])
    y = np.stack([text[s + 1:s + LENGTH + 1] for s in starts])[..., None]
    print("step loss %r" % float(model.train_on_batch(x, y)), flush=True)
