"""gpt-2-simple 0.7.2 (nshepperd's GPT-2 fine-tuning): training as gpt_2_simple.finetune builds it
from the package's own parts. src.model's transformer (token and position embeddings read by
tf.gather, the output tied to the token embedding) under TF1's AdamOptimizer, its gradients by
either src.accumulate.AccumulatingOptimizer (--accumulate N: one run zeroes its accumulators, N
runs each add a micro-batch's gradients, one applies their sum and returns the micro-batches'
mean loss), src.memory_saving_gradients (--checkpointed: gradient checkpointing, the forward pass
copied into the backward one) or tf.gradients. A 2-layer model of width 16 on random token ids.
Prints each step's loss, as finetune reports it. argv: --steps N [--accumulate N] [--checkpointed]."""
import argparse

import numpy as np
import tensorflow as tf
from gpt_2_simple.src import memory_saving_gradients, model
from gpt_2_simple.src.accumulate import AccumulatingOptimizer

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--accumulate", type=int, default=1)
parser.add_argument("--checkpointed", action="store_true")
parser.add_argument("--lr", type=float, default=1e-3)
args = parser.parse_args()
tf.compat.v1.set_random_seed(1)
BATCH, SEQ, VOCAB = 2, 16, 48
hparams = model.default_hparams()
hparams.override_from_dict(dict(n_vocab=VOCAB, n_ctx=SEQ, n_embd=16, n_head=2, n_layer=2))
context = tf.compat.v1.placeholder(tf.int32, [BATCH, None], name="context")
output = model.model(hparams=hparams, X=context)
loss = tf.reduce_mean(input_tensor=tf.nn.sparse_softmax_cross_entropy_with_logits(
    labels=context[:, 1:], logits=output["logits"][:, :-1]))
train_vars = [v for v in tf.compat.v1.trainable_variables() if "model" in v.name]
opt = tf.compat.v1.train.AdamOptimizer(learning_rate=args.lr)
if args.accumulate > 1:
    opt = AccumulatingOptimizer(opt=opt, var_list=train_vars)
    opt_reset, opt_compute, opt_apply = opt.reset(), opt.compute_gradients(loss), opt.apply_gradients()
else:
    grads = memory_saving_gradients.gradients(loss, train_vars) if args.checkpointed else \
        tf.gradients(ys=loss, xs=train_vars)
    opt_apply = opt.apply_gradients(list(zip(grads, train_vars)))
rng = np.random.RandomState(0)
with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    for _ in range(args.steps):
        if args.accumulate > 1:
            sess.run(opt_reset)
            for _ in range(args.accumulate):
                sess.run(opt_compute, feed_dict={context: rng.randint(0, VOCAB, (BATCH, SEQ))})
            value = sess.run(opt_apply)
        else:
            _, value = sess.run((opt_apply, loss), feed_dict={context: rng.randint(0, VOCAB, (BATCH, SEQ))})
        print("step loss %.9g" % value, flush=True)
