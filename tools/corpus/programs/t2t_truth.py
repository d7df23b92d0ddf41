"""What t2t_adafactor.py's training should record, computed with t2t alone (no tracekit): the
learning rate at each step, from t2t's learning_rate_schedule under the driver's hparams, and
Adafactor's slot variables with their roles, from the graph t2t's model_fn builds for training
(the Estimator's TRAIN graph, fed by the problem's own input_fn).

Step k runs with global_step == k (the optimizer increments it after its updates), so the rate
at step k is the schedule at global_step k: here 2.0 * min(1, k/4) * max(k, 4) ** -0.5 * 16 ** -0.5,
0 at step 0 (T2TModel.optimize hands Adafactor this divided by sqrt(1) replicas). Adafactor's
second-moment decay_rate is printed too ("pow": 1 - (k + 1) ** -memory_exponent).
Slots: Adafactor makes "m" (beta1 > 0 only), then "vr" and "vc" for a variable of rank >= 2
(factored: row and column means of the squared gradient), else "v" (the full second moment),
each named <variable>/Adafactor, <variable>/Adafactor_1, ... in that order, under the
"training/" scope of contrib's optimize_loss, which t2t's optimize() calls.
argv: --steps N WORKDIR (the driver's; its data is generated there when missing)."""
import argparse
import ast
import os

import tensorflow as tf
from tensor2tensor import models, problems  # noqa: F401 (registers them)
from tensor2tensor.utils import adafactor, learning_rate, registry, t2t_model, trainer_lib

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("workdir")
args = parser.parse_args()
driver = os.path.join(os.path.dirname(os.path.abspath(__file__)), "t2t_adafactor.py")
consts = {}
for node in ast.parse(open(driver).read()).body:  # the driver's PROBLEM, MODEL, HPARAMS, OVERRIDES
    if isinstance(node, ast.Assign):
        names = [n.id for n in getattr(node.targets[0], "elts", [node.targets[0]]) if isinstance(n, ast.Name)]
        if set(names) & {"PROBLEM", "MODEL", "HPARAMS", "OVERRIDES"}:
            values = ast.literal_eval(node.value)
            consts.update(zip(names, values if len(names) > 1 else [values]))
PROBLEM, MODEL = consts["PROBLEM"], consts["MODEL"]

trainer_lib.set_random_seed(1)
data_dir, tmp_dir = os.path.join(args.workdir, "data"), os.path.join(args.workdir, "tmp")
if not (os.path.isdir(data_dir) and tf.gfile.Glob(os.path.join(data_dir, PROBLEM + "-train*"))):
    for d in (data_dir, tmp_dir):
        os.makedirs(d, exist_ok=True)
    registry.problem(PROBLEM).generate_data(data_dir, tmp_dir)
hparams = trainer_lib.create_hparams(consts["HPARAMS"], consts["OVERRIDES"])
config = trainer_lib.create_run_config(MODEL, model_dir=os.path.join(args.workdir, "truth"), random_seed=1,
                                       save_checkpoints_steps=None)
# what create_experiment adds before it builds the Estimator
for key, value in dict(model_dir=config.model_dir, data_dir=data_dir, train_steps=args.steps, eval_steps=1,
                       schedule="train", warm_start_from=None, std_server_protocol=None, eval_freq_in_steps=2000,
                       eval_timeout_mins=240).items():
    hparams.add_hparam(key, value)
trainer_lib.add_problem_hparams(hparams, PROBLEM)

with tf.Graph().as_default():
    tf.set_random_seed(1)
    step = tf.train.get_or_create_global_step()
    input_fn = hparams.problem.make_estimator_input_fn(tf.estimator.ModeKeys.TRAIN, hparams)
    features, labels = tf.data.make_one_shot_iterator(input_fn({}, config)).get_next()  # as the Estimator does
    model_fn = t2t_model.T2TModel.make_estimator_model_fn(MODEL, hparams)
    tf.autograph.experimental.do_not_convert(model_fn)(features, labels, tf.estimator.ModeKeys.TRAIN, {}, config)
    rate = learning_rate.learning_rate_schedule(hparams)
    decay = adafactor.adafactor_decay_rate_pow(hparams.optimizer_adafactor_memory_exponent)
    with tf.Session(config=config.session_config) as session:  # t2t places on gpu:0, softly
        session.run(step.initializer)
        print("schedule %s, constant %r, warmup %d, hidden_size %d" % (
            hparams.learning_rate_schedule, hparams.learning_rate_constant, hparams.learning_rate_warmup_steps,
            hparams.hidden_size))
        for k in range(args.steps):
            session.run(step.assign(k))
            lr, dr = session.run([rate, decay])
            print("step %d lr %r adafactor_decay_rate %r" % (k, float(lr), float(dr)))
    beta1 = hparams.optimizer_adafactor_beta1
    print("adafactor beta1 %r factored %r multiply_by_parameter_scale %r clipping_threshold %r" % (
        beta1, hparams.optimizer_adafactor_factored, hparams.optimizer_adafactor_multiply_by_parameter_scale,
        hparams.optimizer_adafactor_clipping_threshold))
    others = {v.op.name: v for v in tf.global_variables()}
    for var in tf.trainable_variables():
        shape = var.shape.as_list()
        roles = ([("m (first moment)", shape)] if beta1 else []) + (
            [("vr (factored second moment: row means)", shape[:-1]),
             ("vc (factored second moment: column means)", shape[:-2] + shape[-1:])]
            if hparams.optimizer_adafactor_factored and len(shape) >= 2 else [("v (full second moment)", shape)])
        print("%s %s" % (var.op.name, shape))
        for i, (role, want) in enumerate(roles):
            name = "%s/Adafactor%s" % (var.op.name, "_%d" % i if i else "")
            name = [n for n in others if n == name or n.endswith("/" + name)]  # under optimize_loss's "training/"
            have = others[name[0]].shape.as_list() if len(name) == 1 else None
            print("    %s %s %s" % (name[0], have, role) if have == want else
                  "    %s: not found as %s (%s, %s)" % (role, want, name, have))
