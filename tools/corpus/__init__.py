"""The corpus: public TF1 programs installed from the package registry at pinned versions
(tools/requirements/legacy.txt), each run unmodified by a short driver on synthetic data,
recorded zero-code in the legacy environment and replayed through the TF2 port a team would
write (tools/corpus/ports). docs/CORPUS.md lists them with their figures;
`python -m tools.corpus` records and replays them (tests/replay/test_corpus.py in CI)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple


@dataclass(frozen=True)
class Program:
    name: str
    package: str  # what is installed from the registry, pinned
    driver: str  # relative to the repository root; calls only the package's documented API
    args: Tuple[str, ...]  # after the driver; "{workdir}" is a scratch folder
    patterns: str  # what it exercises
    slow: str = ""  # why CI does not run it ("": it does)
    port_code: str = ""  # where the port's code is, when tools/corpus/ports/<name>.py only hands it on
    env: str = ".venv-legacy"  # the legacy environment it is installed in (its pins clash with another's)
    ported: bool = True  # tools/corpus/ports/<name>.py holds its port ("": recorded and held to its truth only)
    # The driver prints "step loss X" for each training step, X the total loss its optimizer minimizes,
    # computed without tracekit: the golden's loss is held to it at every step.
    prints_loss: bool = False

    def python(self, root: str) -> str:
        """Its legacy interpreter, in the checkout at `root`."""
        import os

        return os.path.join(root, self.env, "bin", "python")


PROGRAMS = (
    Program("estimator_wide_deep", "tensorflow-estimator==1.15.1", "tools/corpus/programs/estimator_wide_deep.py",
            ("--steps", "4", "{workdir}"),
            "canned DNNLinearCombinedClassifier on feature columns (vocabulary, crossed, embedding, numeric), "
            "tf.data, partitioned variables, FTRL + Adagrad, sparse gradients, the head's summed loss"),
    Program("estimator_dnn_queue", "tensorflow-estimator==1.15.1", "tools/corpus/programs/estimator_dnn_queue.py",
            ("--steps", "6", "{workdir}"),
            "canned DNNClassifier on numeric columns fed by numpy_input_fn (queue runners on their own threads)"),
    Program("estimator_linear", "tensorflow-estimator==1.15.1", "tools/corpus/programs/estimator_linear.py",
            ("--steps", "6", "{workdir}"),
            "canned LinearClassifier on a vocabulary and a bucketized column, tf.data, FTRL, sparse gradients"),
    Program("slim_resnet", "tf-slim==1.1.0", "tools/goldens/slim_resnet.py", ("--steps", "3"),
            "tf_slim.nets.resnet_v1 trained by tf_slim.learning.train (a Supervisor loop), batch norm, "
            "slim's L2 weight decay, momentum SGD, tf.data", port_code="tools/ports/slim_resnet.py"),
    Program("tflearn_dnn", "tflearn==0.5.0", "tools/corpus/programs/tflearn_dnn.py", ("--steps", "8", "{workdir}"),
            "tflearn layers and its DNN.fit trainer (feed_dict loops, its Adam, its bookkeeping variables)"),
    Program("sonnet_mlp", "dm-sonnet==1.36", "tools/corpus/programs/sonnet_mlp.py", ("--steps", "8"),
            "Sonnet 1 modules (snt.nets.MLP: its own scopes and weight names) in a Session loop with Adam"),
    Program("tfp_bayesian", "tensorflow-probability==0.8.0", "tools/corpus/programs/tfp_bayesian.py", ("--steps", "8"),
            "tfp.layers.DenseReparameterization: weights drawn from their posterior every step (random draws), "
            "a KL divergence among the layer's losses"),
    # The learning rate's decay spread over 1e9 steps, no warmup: BERT reads global_step unordered
    # with its increment (a race the golden records), and a rate constant in float32 keeps the run
    # deterministic whichever way it goes.
    Program("bert_classifier", "bert-tensorflow==1.0.4", "tools/corpus/programs/bert_classifier.py",
            ("--steps", "4", "--train-steps", "1000000000", "--warmup", "0"),
            "google-research/bert's run_classifier model (BertModel, dropout on, embeddings by tf.gather) "
            "fine-tuned by its AdamWeightDecayOptimizer: tf.gradients, clip_by_global_norm, hand-written assign "
            "updates with decoupled weight decay, an unordered global-step increment; ported with a "
            "hand-written optimizer", prints_loss=True),
    Program("tfgan_alternating", "tensorflow-gan==2.0.0", "tools/corpus/programs/tfgan_alternating.py",
            ("--steps", "3"),
            "TF-GAN's gan_model, gan_loss and gan_train_ops: two losses, two Adam optimizers, their train ops "
            "in alternating session runs (two kinds of steps)", ported=False, prints_loss=True),
    Program("sb_a2c", "stable-baselines==2.10.2", "tools/corpus/programs/sb_a2c.py", ("--steps", "6"),
            "stable-baselines A2C on CartPole: a composite loss (policy gradient - entropy + value loss) "
            "differentiated by tf.gradients, clip_by_global_norm, RMSProp, its own session loop",
            env=".venv-legacy-rl", prints_loss=True),
    Program("sb_ppo2", "stable-baselines==2.10.2", "tools/corpus/programs/sb_ppo2.py", ("--updates", "2"),
            "stable-baselines PPO2 on CartPole: minibatch epochs, a clipped surrogate and clipped value loss "
            "differentiated by tf.gradients, clip_by_global_norm, Adam", env=".venv-legacy-rl", ported=False,
            prints_loss=True),
    Program("deepctr_deepfm", "deepctr==0.8.2", "tools/corpus/programs/deepctr_deepfm.py", ("--steps", "8"),
            "deepctr.models.DeepFM (linear, factorization machine and DNN over shared embeddings, L2 on the "
            "embeddings) trained by TF1 Keras compile/fit, the Keras optimizer's hyperparameters as variables"),
    Program("gpt2_accumulate", "gpt-2-simple==0.7.2", "tools/corpus/programs/gpt2_simple.py",
            ("--steps", "3", "--accumulate", "3"),
            "gpt-2-simple's GPT-2 (token and position embeddings by tf.gather, the output tied to the token "
            "embedding) under TF1 Adam through its AccumulatingOptimizer: steps made of three kinds of run (zero "
            "the accumulators, add each micro-batch's gradients, apply their sum)", prints_loss=True),
    Program("gpt2_checkpointed", "gpt-2-simple==0.7.2", "tools/corpus/programs/gpt2_simple.py",
            ("--steps", "3", "--checkpointed"),
            "gpt-2-simple's GPT-2 under TF1 Adam, its gradients by memory_saving_gradients (gradient "
            "checkpointing: the forward pass copied into the backward one, ordered only after the loss): the loss "
            "inferred from the gradient seed, and the gradients racing with the updates (named and measured)",
            ported=False, prints_loss=True),
    Program("tflearn_lstm_lm", "tflearn==0.5.0", "tools/corpus/programs/tflearn_lstm_lm.py",
            ("--steps", "4", "{workdir}"),
            "tflearn's character-level LSTM language model (two tflearn.lstm layers, dropout between them drawn "
            "inside tflearn's tf.cond on is_training) trained by tflearn.SequenceGenerator.fit", ported=False),
    Program("tflearn_gan", "tflearn==0.5.0", "tools/corpus/programs/tflearn_gan.py", ("--steps", "4", "{workdir}"),
            "tflearn's GAN: generator and discriminator sharing weights across three towers, two regression "
            "trainers (each its own Adam over its own variables) run one after the other in every DNN.fit step "
            "(two kinds of steps)", ported=False),
    Program("contrib_batchnorm", "tensorflow==1.15.5", "tools/corpus/programs/contrib_batchnorm.py",
            ("--steps", "6"),
            "tf.contrib.layers' fully_connected with contrib batch_norm and tf.layers' batch_normalization (moving "
            "averages in UPDATE_OPS), trained by tf.contrib.layers.optimize_loss (UPDATE_OPS run first, gradients "
            "clipped, learning rate decayed) under momentum SGD", ported=False, prints_loss=True),
    Program("estimator_batchnorm_data", "tensorflow-estimator==1.15.1",
            "tools/corpus/programs/estimator_batchnorm_data.py", ("--steps", "4", "{workdir}"),
            "canned DNNClassifier with batch_norm=True and dropout (tf.layers batch normalization, UPDATE_OPS), fed "
            "by a tf.data pipeline that shuffles (seeded) and adds random noise in a map (draws in the input "
            "pipeline)", ported=False),
    Program("estimator_loss_scale", "tensorflow-estimator==1.15.1", "tools/corpus/programs/estimator_loss_scale.py",
            ("--steps", "4", "{workdir}"),
            "canned DNNClassifier trained through tf.compat.v1.train.experimental.MixedPrecisionLossScaleOptimizer "
            "(a dynamic loss scale around Adam: scaled loss, unscaled gradients, the update inside a tf.cond on "
            "their being finite)"),
    Program("seq2seq_attention", "tensorflow==1.15.5", "tools/corpus/programs/seq2seq_attention.py", ("--steps", "6"),
            "tf.contrib.seq2seq as the NMT tutorial uses it: embedding_lookup, an LSTM encoder (dynamic_rnn), a "
            "Luong AttentionWrapper decoder unrolled by dynamic_decode (while loops), a masked sequence_loss on "
            "variable-length pairs, clip_by_global_norm, Adam (sparse gradients of two embeddings)",
            ported=False, prints_loss=True),
    Program("tfp_vae", "tensorflow-probability==0.8.0", "tools/corpus/programs/tfp_vae.py", ("--steps", "6"),
            "a variational autoencoder on tfp.distributions: a diagonal normal posterior sampled by "
            "reparameterization (a draw every step), a Bernoulli decoder, the analytic KL divergence by "
            "tfd.kl_divergence, Adam", prints_loss=True),
    Program("sonnet_lstm_lm", "dm-sonnet==1.36", "tools/corpus/programs/sonnet_lstm_lm.py", ("--steps", "6"),
            "a word-level LSTM language model of Sonnet 1 modules (snt.Embed's table read by embedding_lookup, "
            "snt.LSTM unrolled by tf.nn.dynamic_rnn, snt.BatchApply(snt.Linear)) under TF1 Adam: the table's "
            "gradient as sparse rows, Adam's sparse update path", ported=False, prints_loss=True),
    Program("dopamine_dqn", "dopamine-rl==2.0.5", "tools/corpus/programs/dopamine_dqn.py", ("--steps", "40"),
            "Dopamine's DQNAgent on CartPole driven through its agent API: its replay buffer sampled by a "
            "tf.py_func into a StagingArea (the step's inputs come out of the staging area, put there by the run "
            "before), a Huber TD loss, centered RMSProp, the target network synced by assigns between steps",
            env=".venv-legacy-rl", ported=False),
    # Standalone Keras 2.2 builds its optimizer's updates unordered with the gradients that read the
    # weights they move (ref variables): its fit races, and plain runs from one seed differ by step 2.
    Program("keras22_cnn", "keras==2.2.5", "tools/corpus/programs/keras22_cnn.py", ("--steps", "4"),
            "standalone Keras 2.2 on its TF1 backend: Conv2D, MaxPooling2D, Dropout (a learning-phase cond), Dense "
            "trained by Model.fit through its backend function (a session callable) and Keras' own Adam (moments "
            "made by K.variable, trainable, updated by hand-written assigns, unordered with the gradients: races "
            "the golden measures)", ported=False),
    Program("keras22_lstm", "keras==2.2.5", "tools/corpus/programs/keras22_lstm.py", ("--steps", "4"),
            "standalone Keras 2.2: an Embedding, an LSTM (a while loop forward and backward) and a TimeDistributed "
            "softmax trained by train_on_batch and Keras' RMSprop: the embedding's and the LSTM's gradients race "
            "with the head's update through the loop (named and measured)", ported=False, prints_loss=True),
    # tensor2tensor's own pins (tensorflow-probability 0.7, tensorflow-datasets 3.2) live in their own
    # environment (tools/requirements/legacy-t2t.txt). Its training examples arrive in a nondeterministic
    # order (t2t's sloppy parallel_interleave): each recording is self-consistent, two differ.
    Program("t2t_adafactor", "tensor2tensor==1.15.7", "tools/corpus/programs/t2t_adafactor.py",
            ("--steps", "6", "{workdir}"),
            "tensor2tensor's Transformer (transformer_tiny, one layer, dropout) trained by t2t's trainer path "
            "(trainer_lib.create_experiment, an Estimator on t2t's input pipeline over data t2t generates) under "
            "t2t's hand-written AdafactorOptimizer: factored second moments (vr/vc slots), update clipping, the "
            "learning rate times each parameter's RMS plus a 1e-30 * mean(g^2) hack, t2t's warmup * rsqrt "
            "schedule (0 at step 0), resource variables, the step's loss read by a training hook",
            env=".venv-legacy-t2t", ported=False, prints_loss=True),
)


def step_loss(step: Any) -> float:
    """A step's loss as a program prints it: a step made of micro-batch runs holds each one's, and
    prints their mean (gpt-2-simple's AccumulatingOptimizer returns total / count)."""
    import numpy as np

    return float(np.mean(np.asarray(step["loss/loss"], np.float64)))


def by_name(name: str) -> Program:
    for program in PROGRAMS:
        if program.name == name:
            return program
    raise KeyError("no corpus program %r (there are: %s)" % (name, ", ".join(p.name for p in PROGRAMS)))


@dataclass(frozen=True)
class Recorded:
    seconds: float  # the whole `tracekit record` process
    output: str  # what the driver printed

    def losses(self) -> Tuple[float, ...]:
        """The totals a driver with prints_loss printed, one per training step."""
        import re

        return tuple(float(v) for v in re.findall(r"^step loss (\S+)$", self.output, re.M))


def record(program: Program, python: str, out: str, workdir: str, timeout: float = 600,
           options: Tuple[str, ...] = (), args: Optional[Tuple[str, ...]] = None) -> Recorded:
    """Record `program` with the legacy interpreter `python` into `out` (zero-code, the
    driver unchanged); `options` go to `tracekit record` (--every K, --budget SIZE), `args`, if
    given, to the driver instead of the program's own."""
    import os
    import subprocess
    import time

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = [a.replace("{workdir}", workdir) for a in (program.args if args is None else args)]
    # A process that imported TensorFlow 2 set TF2_BEHAVIOR=1, which would turn TF 1.15 eager; TF 1.15's
    # XLA aborts on the flags a newer XLA (JAX's) is given.
    env = {k: v for k, v in os.environ.items() if k not in ("TF2_BEHAVIOR", "XLA_FLAGS")}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")])))
    start = time.perf_counter()
    done = subprocess.run([python, "-m", "tracekit", "record", "-o", out] + list(options) +
                          ["--", os.path.join(root, program.driver)] + args, cwd=root, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=timeout, env=env)
    if done.returncode:
        raise RuntimeError("recording %s failed (%d):\n%s" % (program.name, done.returncode,
                                                              done.stdout.decode(errors="replace")[-4000:]))
    return Recorded(time.perf_counter() - start, done.stdout.decode(errors="replace"))


def replay(program: Program, golden: str, forcing: str = "none", **port_args: Any) -> Any:
    """Replay the golden through the program's port (tools/corpus/ports/<name>.py, made with
    `port_args`), from the golden's state at every step where `forcing` is "state", and compare
    at the default tolerance (Tolerance()); returns the comparison."""
    import importlib

    import tracekit
    import tracekit.tf2

    module = importlib.import_module("tools.corpus.ports." + program.name)
    model, step, options = module.port(tracekit.tf2.tf, **port_args)
    where = {"variables": model} if isinstance(model, (list, tuple)) else {"model": model}
    with tracekit.tf2.replay(golden, step, forcing=forcing, **where, **options) as actual:
        return tracekit.compare(golden, actual, tracekit.Tolerance())


def port_lines(program: Program) -> int:
    """The port's size: its lines of code, without blank lines, comments and docstrings."""
    import ast
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "..", program.port_code) if program.port_code else \
        os.path.join(here, "ports", program.name + ".py")
    with open(path) as f:
        source = f.read()
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(getattr(body[0], "value", None), ast.Constant) and isinstance(body[0].value.value, str):
            docstrings.update(range(body[0].lineno, body[0].end_lineno + 1))
    return sum(1 for number, line in enumerate(source.splitlines(), 1)
               if line.strip() and not line.strip().startswith("#") and number not in docstrings)
