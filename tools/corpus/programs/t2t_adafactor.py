"""tensor2tensor 1.15.7: a tiny Transformer (transformer_tiny, hidden 16, one layer, dropout on)
trained by t2t's own trainer path, as t2t-trainer does it (trainer_lib.create_hparams,
create_run_config, create_experiment, its "train" schedule: an Estimator on t2t's input
pipeline), under t2t's AdafactorOptimizer (factored second moments, update clipping, steps scaled
by the parameter's RMS) and its Transformer schedule (constant*linear_warmup*rsqrt_decay*
rsqrt_hidden_size, warmup shortened to 4 steps), on algorithmic_reverse_binary40_test, whose data
t2t generates itself. Prints, for each training step, the loss the Estimator trains on (the
EstimatorSpec's, which the Estimator adds to the LOSSES collection; weight decay is 0, so it is
the total_loss Adafactor minimizes), read by a training hook. Seeded, but the examples arrive in
an order t2t's sloppy parallel_interleave leaves to its threads: two runs differ after a step or
two. No checkpoints (save_checkpoints_steps=None). argv: --steps N WORKDIR."""
import argparse
import os

import tensorflow as tf
from tensor2tensor import models, problems  # noqa: F401 (registers them, as t2t-trainer does)
from tensor2tensor.utils import registry, trainer_lib

PROBLEM, MODEL, HPARAMS = "algorithmic_reverse_binary40_test", "transformer", "transformer_tiny"
# One shard for the shared embedding: its 16 default shards of a 4-symbol vocabulary leave 12 of
# them with no rows, whose Adafactor column means become NaN (the mean of an empty gradient).
OVERRIDES = ("hidden_size=16,filter_size=32,num_heads=2,num_hidden_layers=1,batch_size=64,batch_shuffle_size=16,"
             "symbol_modality_num_shards=1,optimizer=adafactor,learning_rate_warmup_steps=4")
parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("workdir")
args = parser.parse_args()


class PrintLoss(tf.train.SessionRunHook):
    def begin(self):
        self.loss = tf.get_collection(tf.GraphKeys.LOSSES)[-1]

    def before_run(self, run_context):
        return tf.train.SessionRunArgs(self.loss)

    def after_run(self, run_context, run_values):
        print("step loss %r" % float(run_values.results), flush=True)


trainer_lib.set_random_seed(1)
data_dir, tmp_dir = os.path.join(args.workdir, "data"), os.path.join(args.workdir, "tmp")
for d in (data_dir, tmp_dir):
    os.makedirs(d, exist_ok=True)
registry.problem(PROBLEM).generate_data(data_dir, tmp_dir)
hparams = trainer_lib.create_hparams(HPARAMS, OVERRIDES)
config = trainer_lib.create_run_config(MODEL, model_dir=os.path.join(args.workdir, "train"), random_seed=1,
                                       save_checkpoints_steps=None)
experiment = trainer_lib.create_experiment(config, hparams, MODEL, PROBLEM, data_dir, train_steps=args.steps,
                                           eval_steps=1, schedule="train", additional_train_hooks=[PrintLoss()])
# t2t's models are Keras layers, which TF 1.15 runs through AutoGraph: converting t2t's graph-mode
# code costs ~80 s of CPU (the step-0 loss is the same either way); do_not_convert runs it as written.
tf.autograph.experimental.do_not_convert(experiment.train)()
print("trained", flush=True)
