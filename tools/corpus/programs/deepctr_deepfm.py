"""deepctr 0.8.2: a DeepFM click-through model (linear part, factorization machine, DNN over
shared embeddings, L2 on the embeddings) built by deepctr.models.DeepFM on sparse and dense
feature columns and trained by TF1 Keras' compile/fit, on synthetic data. argv: --steps N
(a multiple of 4: batches of 16 of 64 rows)."""
import argparse

import numpy as np
import tensorflow as tf
from deepctr.feature_column import DenseFeat, SparseFeat
from deepctr.models import DeepFM

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=8)
args = parser.parse_args()
tf.compat.v1.set_random_seed(3)
rng = np.random.RandomState(0)
data = {"c1": rng.randint(0, 5, (64, 1)), "c2": rng.randint(0, 7, (64, 1)),
        "d1": rng.randn(64, 1).astype(np.float32)}
clicked = ((data["c1"][:, 0] % 2 == 0) ^ (data["d1"][:, 0] > 0)).astype(np.float32)
columns = [SparseFeat("c1", 5, embedding_dim=4), SparseFeat("c2", 7, embedding_dim=4), DenseFeat("d1", 1)]
model = DeepFM(columns, columns, dnn_hidden_units=(8,), task="binary", seed=1024)
model.compile("adam", "binary_crossentropy")
model.fit(data, clicked, batch_size=16, epochs=args.steps // 4, shuffle=False, verbose=0)
print("trained", flush=True)
