"""tflearn 0.5.0: a character-level LSTM language model as tflearn's own example writes one (two
tflearn.lstm layers over one-hot characters, dropout between, a softmax over the next character)
trained by tflearn.SequenceGenerator.fit, its text generator's trainer (gradients clipped at 5), on a
synthetic text cut into semi-redundant sequences by tflearn.data_utils. argv: --steps N WORKDIR
(N even: 32 sequences in batches of 16)."""
import argparse

import tflearn
from tflearn.data_utils import string_to_semi_redundant_sequences

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=4)
parser.add_argument("workdir")
args = parser.parse_args()
text = "the quick brown fox jumps over the lazy dog; " * 3
maxlen = 8
x, y, char_idx = string_to_semi_redundant_sequences(text[:maxlen + 32 * 4], seq_maxlen=maxlen, redun_step=4)
tflearn.init_graph(seed=1)
net = tflearn.input_data([None, maxlen, len(char_idx)], name="chars")
net = tflearn.lstm(net, 16, return_seq=True, name="lstm1")
net = tflearn.dropout(net, 0.5)
net = tflearn.lstm(net, 16, name="lstm2")
net = tflearn.fully_connected(net, len(char_idx), activation="softmax", name="next_char")
net = tflearn.regression(net, optimizer="adam", loss="categorical_crossentropy", learning_rate=0.01,
                         name="target")
model = tflearn.SequenceGenerator(net, dictionary=char_idx, seq_maxlen=maxlen, clip_gradients=5.0,
                                  tensorboard_verbose=0, tensorboard_dir=args.workdir)
model.fit(x, y, n_epoch=args.steps // 2, batch_size=16, shuffle=False)
print("trained", flush=True)
