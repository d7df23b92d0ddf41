"""tflearn 0.5.0: a classifier built from tflearn.layers (fully_connected, regression) and trained
by tflearn.DNN.fit, tflearn's own trainer (feed_dict loops, its Adam, its summaries), on
synthetic data. argv: --steps N WORKDIR (N a multiple of 4: batches of 16 of 64 rows)."""
import argparse

import numpy as np
import tflearn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("workdir")
args = parser.parse_args()
rng = np.random.RandomState(0)
x = rng.randn(64, 6).astype(np.float32)
y = np.eye(2, dtype=np.float32)[(x[:, 0] + x[:, 1] > 0).astype(int)]
tflearn.init_graph(seed=1)
net = tflearn.input_data([None, 6], name="x")
net = tflearn.fully_connected(net, 8, activation="relu", name="hidden")
net = tflearn.fully_connected(net, 2, activation="softmax", name="out")
net = tflearn.regression(net, optimizer="adam", learning_rate=0.01, loss="categorical_crossentropy", name="target")
model = tflearn.DNN(net, tensorboard_verbose=0, tensorboard_dir=args.workdir)
model.fit(x, y, n_epoch=args.steps // 4, batch_size=16, shuffle=False, show_metric=False)
print("trained", flush=True)
