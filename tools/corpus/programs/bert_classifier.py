"""google-research/bert (bert-tensorflow 1.0.4): a sentence classifier as run_classifier builds it
(create_model: BertModel, its pooled output, a dense head), fine-tuned by optimization's
create_optimizer (AdamWeightDecayOptimizer: tf.gradients, clip_by_global_norm, assign-based
updates with weight decay, the global step advanced in the same group). A 2-layer config of width
32 on random token ids, trained from its random initialization. Prints, for each training step,
the total loss. argv: --steps N [--train-steps T] [--warmup W]: the learning rate warms up over W
steps and decays to 0 over T (by default T = N, W = 1, as a short fine-tuning run sets them) from
--lr (1e-3);
--hidden, --layers, --heads, --intermediate, --vocab, --positions, --seq and --batch size the model
and its batches (BERT-base: 768, 12, 12, 3072, 30522, 512)."""
import argparse

import numpy as np
import tensorflow as tf
from bert import modeling, optimization, run_classifier

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=4)
parser.add_argument("--train-steps", type=int)
parser.add_argument("--warmup", type=int, default=1)
parser.add_argument("--lr", type=float, default=1e-3, help="the peak learning rate (run_classifier's default: 5e-5)")
for name, default in (("hidden", 32), ("layers", 2), ("heads", 2), ("intermediate", 64), ("vocab", 64),
                      ("positions", None), ("seq", 16), ("batch", 4)):
    parser.add_argument("--" + name, type=int, default=default)
args = parser.parse_args()
tf.compat.v1.set_random_seed(1)
BATCH, SEQ, VOCAB, LABELS = args.batch, args.seq, args.vocab, 3
config = modeling.BertConfig(vocab_size=VOCAB, hidden_size=args.hidden, num_hidden_layers=args.layers,
                             num_attention_heads=args.heads, intermediate_size=args.intermediate,
                             max_position_embeddings=args.positions or SEQ)
ids = tf.compat.v1.placeholder(tf.int32, [BATCH, SEQ], name="input_ids")
mask = tf.compat.v1.placeholder(tf.int32, [BATCH, SEQ], name="input_mask")
segments = tf.compat.v1.placeholder(tf.int32, [BATCH, SEQ], name="segment_ids")
labels = tf.compat.v1.placeholder(tf.int32, [BATCH], name="label_ids")
loss, _, _, _ = run_classifier.create_model(config, True, ids, mask, segments, labels, LABELS, False)
train = optimization.create_optimizer(loss, args.lr, args.train_steps or args.steps, args.warmup, False)
rng = np.random.RandomState(0)
with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    for _ in range(args.steps):
        lengths = rng.randint(SEQ // 2, SEQ + 1, BATCH)
        feed = {ids: rng.randint(1, VOCAB, (BATCH, SEQ)), mask: (np.arange(SEQ) < lengths[:, None]).astype(np.int32),
                segments: (np.arange(SEQ) >= SEQ // 2).astype(np.int32)[None].repeat(BATCH, 0),
                labels: rng.randint(0, LABELS, BATCH)}
        value, _ = sess.run([loss, train], feed)
        print("step loss %.9g" % value, flush=True)
