"""TensorFlow 1.15's tf.contrib.seq2seq as its neural machine translation tutorial uses it: token
embeddings by embedding_lookup (encoder and decoder), an LSTM encoder run by tf.nn.dynamic_rnn,
a decoder cell wrapped by AttentionWrapper over Luong attention on the encoder's outputs, a
TrainingHelper and BasicDecoder unrolled by dynamic_decode, sequence_loss masked by the target
lengths, gradients clipped by their global norm, Adam; a Session loop feeding variable-length
synthetic sentence pairs (a reversal task) and printing the loss. argv: --steps N."""
import argparse

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
args = parser.parse_args()
VOCAB, GO, EOS, UNITS, BATCH, MAXLEN = 12, 1, 2, 16, 8, 6
seq2seq = tf.contrib.seq2seq
tf.compat.v1.set_random_seed(1)
source = tf.compat.v1.placeholder(tf.int32, [None, None], name="source")
source_length = tf.compat.v1.placeholder(tf.int32, [None], name="source_length")
target_in = tf.compat.v1.placeholder(tf.int32, [None, None], name="target_in")
target_out = tf.compat.v1.placeholder(tf.int32, [None, None], name="target_out")
target_length = tf.compat.v1.placeholder(tf.int32, [None], name="target_length")
with tf.compat.v1.variable_scope("encoder"):
    embedding = tf.compat.v1.get_variable("embedding", [VOCAB, UNITS])
    cell = tf.compat.v1.nn.rnn_cell.LSTMCell(UNITS)
    memory, state = tf.compat.v1.nn.dynamic_rnn(cell, tf.nn.embedding_lookup(embedding, source),
                                                sequence_length=source_length, dtype=tf.float32)
with tf.compat.v1.variable_scope("decoder"):
    embedding = tf.compat.v1.get_variable("embedding", [VOCAB, UNITS])
    attention = seq2seq.LuongAttention(UNITS, memory, memory_sequence_length=source_length)
    cell = seq2seq.AttentionWrapper(tf.compat.v1.nn.rnn_cell.LSTMCell(UNITS), attention, attention_layer_size=UNITS)
    initial = cell.zero_state(tf.shape(source)[0], tf.float32).clone(cell_state=state)
    helper = seq2seq.TrainingHelper(tf.nn.embedding_lookup(embedding, target_in), target_length)
    decoder = seq2seq.BasicDecoder(cell, helper, initial, output_layer=tf.compat.v1.layers.Dense(VOCAB, name="project"))
    outputs, _, _ = seq2seq.dynamic_decode(decoder)
mask = tf.sequence_mask(target_length, tf.shape(outputs.rnn_output)[1], dtype=tf.float32)
loss = seq2seq.sequence_loss(outputs.rnn_output, target_out[:, :tf.shape(outputs.rnn_output)[1]], mask)
variables = tf.compat.v1.trainable_variables()
gradients, _ = tf.clip_by_global_norm(tf.gradients(loss, variables), 5.0)
train = tf.compat.v1.train.AdamOptimizer(0.01).apply_gradients(zip(gradients, variables))

rng = np.random.RandomState(0)


def batch():
    lengths = rng.randint(2, MAXLEN, BATCH)
    src = np.zeros((BATCH, MAXLEN), np.int32)
    out = np.zeros((BATCH, MAXLEN + 1), np.int32)
    for row, n in enumerate(lengths):
        words = rng.randint(3, VOCAB, n)
        src[row, :n] = words
        out[row, :n + 1] = np.append(words[::-1], EOS)
    into = np.concatenate([np.full((BATCH, 1), GO, np.int32), out[:, :-1]], axis=1)
    return {source: src, source_length: lengths, target_in: into, target_out: out, target_length: lengths + 1}


with tf.compat.v1.Session() as session:
    session.run(tf.compat.v1.global_variables_initializer())
    for step in range(args.steps):
        value, _ = session.run([loss, train], batch())
        print("step loss %r" % float(value), flush=True)
