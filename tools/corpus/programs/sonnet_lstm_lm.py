"""dm-sonnet 1.36: a word-level LSTM language model of Sonnet 1 modules as its own RNN examples
compose them (snt.Embed: a token table read by embedding_lookup; snt.LSTM unrolled by
tf.nn.dynamic_rnn; snt.BatchApply(snt.Linear) over every position), a softmax cross-entropy on the
next token, TF1 Adam (sparse gradient rows for the table), in a Session loop that prints the loss.
argv: --steps N."""
import argparse

import numpy as np
import sonnet as snt
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
args = parser.parse_args()
VOCAB, LENGTH, BATCH = 24, 7, 8
tf.compat.v1.set_random_seed(1)
tokens = tf.compat.v1.placeholder(tf.int32, [BATCH, LENGTH + 1], name="tokens")
embed = snt.Embed(vocab_size=VOCAB, embed_dim=8, name="embed")
lstm = snt.LSTM(16, name="lstm")
project = snt.BatchApply(snt.Linear(VOCAB, name="project"))
outputs, _ = tf.compat.v1.nn.dynamic_rnn(lstm, embed(tokens[:, :-1]), initial_state=lstm.initial_state(BATCH),
                                         time_major=False)
logits = project(outputs)
loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tokens[:, 1:], logits=logits))
train = tf.compat.v1.train.AdamOptimizer(0.01).minimize(loss)
rng = np.random.RandomState(0)
text = rng.randint(0, VOCAB, 500)
with tf.compat.v1.Session() as session:
    session.run(tf.compat.v1.global_variables_initializer())
    for step in range(args.steps):
        starts = rng.randint(0, len(text) - LENGTH - 1, BATCH)
        value, _ = session.run([loss, train], {tokens: np.stack([text[s:s + LENGTH + 1] for s in starts])})
        print("step loss %r" % float(value), flush=True)
