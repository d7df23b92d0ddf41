"""tracekit.tf2.replay: variable mapping, the checks it makes, its options and its output."""

from __future__ import annotations

import numpy as np
import pytest

import tracekit
from tools.ports import seed_example
from tracekit.cli import main

from ..support import golden

SEED = golden("seed_example")


def _sgd_step(tf, model, optimizer):
    loss_fn = tf.keras.losses.CategoricalCrossentropy(from_logits=True)

    def step(inputs):
        with tf.GradientTape() as tape:
            loss = loss_fn(inputs["y:0"], model(inputs["x:0"]))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    return step


def _plain_model(tf, names=("dense", "dense_1", "dense_2"), units=(2, 2, 3)):
    layers = [tf.keras.layers.Dense(u, name=n) for n, u in zip(names, units)]
    model = tf.keras.Sequential(layers)
    model(tf.ones((2, 3)))
    return model


def test_mapping_failures_are_listed_before_replaying(tf2):
    tf = tf2.tf
    model = _plain_model(tf, units=(2, 4, 3))  # dense_1 has the wrong width
    with pytest.raises(tracekit.ReplayError) as err:
        tf2.replay(SEED, _sgd_step(tf, model, tf.keras.optimizers.SGD(0.1)), model=model)
    text = str(err.value)
    assert "shape differs" in text and "dense_1/kernel:0 (2, 2) vs TF2" in text
    assert "6 golden variables, 6 TF2 variables, 3 matched" in text and "pass var_map=" in text
    fewer = _plain_model(tf, names=("dense", "dense_1"), units=(2, 3))
    with pytest.raises(tracekit.ReplayError) as err:
        tf2.replay(SEED, lambda inputs: None, model=fewer)
    assert "only in the golden: dense_2/kernel:0 (2, 3)" in str(err.value)


def test_unbuilt_model(tf2):
    with pytest.raises(tracekit.ReplayError, match="build the model before replaying"):
        tf2.replay(SEED, lambda inputs: None, model=tf2.tf.keras.Sequential([tf2.tf.keras.layers.Dense(2)]))


GOLDEN_VARS = ["dense/kernel:0", "dense/bias:0", "dense_1/kernel:0", "dense_1/bias:0", "dense_2/kernel:0",
               "dense_2/bias:0"]
RENAME = {"dense": "first", "dense_1": "second", "dense_2": "third"}


@pytest.mark.parametrize("how", ["dict", "rules", "callable", "order"])
def test_explicit_and_fallback_mapping(tf2, how):
    tf = tf2.tf
    model = _plain_model(tf, names=("first", "second", "third"))  # a Sequential: names are "first/kernel:0"

    def tf2_name(golden_name):
        layer, var = golden_name.split("/")
        return "%s/%s" % (RENAME[layer], var)
    by_name = {v.name: v for v in model.variables}
    var_map = {
        "dict": {g: by_name[tf2_name(g)] for g in GOLDEN_VARS},  # golden name -> variable
        "rules": [(r"^dense_2/", "third/"), (r"^dense_1/", "second/"), (r"^dense/", "first/")],
        "callable": tf2_name,  # asked about the optimizer state too, which it cannot split: no answer
        "order": "auto",  # names differ: matched by creation order within (role, shape)
    }[how]
    actual = tf2.replay(SEED, _sgd_step(tf, model, tf.keras.optimizers.SGD(0.1)), model=model, var_map=var_map,
                        steps=2)
    expected = "order" if how == "order" else "explicit"
    assert set(actual.meta["replay"]["matched_by"].values()) == {expected}
    # The replay records the TensorFlow that ran it, as the recorder does for the golden.
    assert actual.meta["tensorflow"]["version"] == tf.__version__
    assert actual.meta["tensorflow"]["threads"]["intra_op"] >= 1 and "onednn" in actual.meta["tensorflow"]
    assert actual.meta["replay"]["mapping"]["dense_1/kernel:0"] == tf2_name("dense_1/kernel:0")
    with tracekit.open(SEED) as g:
        assert np.array_equal(actual.initial["var/dense_1/kernel:0"], g.initial["var/dense_1/kernel:0"])


def test_variables_must_be_created_once(tf2):
    tf = tf2.tf
    model, _ = seed_example.make()
    extra = []

    def step(inputs):
        extra.append(tf.Variable(1.0))  # a new variable every step
        return model(inputs["x:0"])[0, 0]
    with pytest.raises(tracekit.ReplayError, match="step 1 created variables"):
        tf2.replay(SEED, step, model=model, steps=3)


def test_random_tape_must_fit(tf2):
    tf = tf2.tf
    model, _ = seed_example.make()

    def step(inputs):
        return tf.reduce_sum(tf.nn.dropout(model(inputs["x:0"]), rate=0.5))  # the golden drew nothing
    with pytest.raises(tracekit.ReplayError, match="draws more random tensors than the golden recorded"):
        tf2.replay(SEED, step, model=model, steps=1)
    estimator = golden("estimator_model")
    from tools.ports import estimator_model
    model, _ = estimator_model.make()

    def no_draw(inputs):
        return tf.reduce_sum(model(inputs["IteratorGetNext:0"], training=False))
    with pytest.raises(tracekit.ReplayError, match="drew 0 random tensors, the golden recorded 1"):
        tf2.replay(estimator, no_draw, model=model, steps=1)


def test_tape_values_are_injected(tf2):
    from tools.ports import estimator_model
    model, step = estimator_model.make()
    actual = tf2.replay(golden("estimator_model"), step, model=model, steps=2)
    with tracekit.open(golden("estimator_model")) as g:
        name = g.names("random")[0]
        assert np.array_equal(actual.step(1)["random/" + name], g.step(1)["random/" + name])


def test_inputs_as_keywords_and_returned_values(tf2):
    tf = tf2.tf
    model, _ = seed_example.make()
    optimizer = tf.keras.optimizers.SGD(1e-3)
    loss_fn = tf.keras.losses.CategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(features, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(features))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss, "lr": optimizer.learning_rate, "grad_norm": tf.linalg.global_norm(grads)}
    actual = tf2.replay(SEED, step, model=model, steps=2, inputs={"x:0": "features", "y:0": "labels"})
    assert "fetch/grad_norm" in actual.step(0) and actual.step(0)["lr/learning_rate"] == np.float32(1e-3)
    with pytest.raises(tracekit.ReplayError, match="inputs= names golden inputs nope:0"):
        tf2.replay(SEED, step, model=model, steps=1, inputs={"nope:0": "features"})


def test_a_returned_key_the_golden_lacks_is_an_error_naming_the_nearest(tf2):
    # the "kind/name" convention with a typo: not a tensor silently left out of the comparison
    tf = tf2.tf
    model, step = seed_example.make()

    def typo(inputs):
        out = step(inputs)
        return dict(out, **{"tap/layr1": tf.zeros(1)})
    with pytest.raises(tracekit.ReplayError, match=r"step 0: the step returned 'tap/layr1', which .*seed_example.h5 "
                                                   r"does not hold; nearest: tap/layer1"):
        tf2.replay(SEED, typo, model=model, steps=1)


def test_save_show_verify_diff(tf2, tmp_path, capsys):
    model, step = seed_example.make()
    out = str(tmp_path / "actual.h5")
    actual = tf2.replay(SEED, step, model=model, steps=5)
    assert actual.save(out) == out
    assert main(["verify", out]) == 0
    assert main(["show", out]) == 0
    assert "replay.golden: " in capsys.readouterr().out
    assert main(["diff", SEED, out]) == 0
    assert "MATCH" in capsys.readouterr().out and "note: the golden has 100 steps, the replay 5" in \
        tracekit.compare(SEED, out).report()


def test_out_path_and_bad_options(tf2, tmp_path):
    model, step = seed_example.make()
    out = str(tmp_path / "direct.h5")
    actual = tf2.replay(SEED, step, model=model, steps=1, out=out)
    assert actual.path == out and len(actual) == 1
    with pytest.raises(tracekit.UsageError, match="init must be 'golden'"):
        tf2.replay(SEED, step, model=model, init="zeros")
    with pytest.raises(tracekit.UsageError, match="random must be 'tape', 'seed' or 'none'"):
        tf2.replay(SEED, step, model=model, random="fixed")


def test_seed_alignment_instead_of_loading(tf2):
    """init="seed" keeps the port's own initial weights: across TF versions tf-keras
    initializers do not draw like TF 1.15, and the comparison says where."""
    with tf2.seeded(SEED) as tool:
        assert tool is not None
        model, step = seed_example.make()
    actual = tf2.replay(SEED, step, model=model, init="seed", random="seed", steps=2)
    result = tracekit.compare(SEED, actual)
    assert result.first_divergence.step == -1 and result.first_divergence.kind == "var"
    assert "first divergence: initial state" in result.report()


@pytest.mark.parametrize("legacy", [False, True])
def test_minimize_and_legacy_optimizers(tf2, legacy):
    """Gradients are taken where the optimizer applies them: minimize() too, new and legacy Keras."""
    tf = tf2.tf
    model, _ = seed_example.make()
    optimizers = tf.keras.optimizers.legacy if legacy else tf.keras.optimizers
    schedule = tf.keras.optimizers.schedules.PolynomialDecay(1e-3, 1000, end_learning_rate=0.0, power=1.0)
    optimizer = optimizers.SGD(schedule)
    loss_fn = tf.keras.losses.CategoricalCrossentropy(from_logits=True)

    def step(inputs):
        loss = lambda: loss_fn(inputs["y:0"], model(inputs["x:0"]))  # noqa: E731
        optimizer.minimize(loss, var_list=model.trainable_variables)
    actual = tf2.replay(SEED, step, model=model, steps=3)
    result = tracekit.compare(SEED, actual)
    assert result.ok, result.report()
    assert result.tensor("grad", "dense/kernel:0").steps == 3 and result.tensor("lr", "learning_rate").steps == 3


def _tape_golden(path):
    """A golden whose step draws uniform (2, 3) and normal (3,) values, raw as TF1 ops output them."""
    rng = np.random.RandomState(0)
    with tracekit.create(path) as w:
        with w.initial():
            w.add("var", "w:0", np.ones(3, np.float32))
        with w.step():
            w.add("input", "x:0", np.zeros((2, 3), np.float32))
            w.add("random", "dropout/random_uniform/RandomUniform:0", rng.rand(2, 3).astype(np.float32))
            w.add("random", "noise/RandomStandardNormal:0", rng.randn(3).astype(np.float32))
            w.add("var", "w:0", np.ones(3, np.float32))
    return path


@pytest.mark.parametrize("traced", [False, True])
def test_tape_values_go_through_the_functions_affine_map(tf2, tmp_path, traced):
    # TF1 records a random op's own output; tf.random.uniform(minval, maxval) and
    # tf.random.normal(mean, stddev) map it, and so must the injected value.
    tf = tf2.tf
    path = _tape_golden(str(tmp_path / "tape.h5"))

    def step(inputs):
        return {"u": tf.random.uniform([2, 3], minval=2.0, maxval=5.0), "n": tf.random.normal([3], 1.0, 0.5)}
    actual = tf2.replay(path, tf.function(step) if traced else step, variables=[tf.Variable(tf.zeros(3), name="w")])
    with tracekit.open(path) as g:
        raw_u = g.step(0)["random/dropout/random_uniform/RandomUniform:0"]
        raw_n = g.step(0)["random/noise/RandomStandardNormal:0"]
    got = actual.step(0)
    assert np.array_equal(got["fetch/u"], raw_u * np.float32(3) + np.float32(2))
    assert np.array_equal(got["fetch/n"], raw_n * np.float32(0.5) + np.float32(1))
    assert tracekit.compare(path, actual).ok  # the raw draws are what is compared


@pytest.mark.parametrize("traced", [False, True])
def test_a_draw_of_another_shape_is_fed_reshaped_and_said(tf2, tmp_path, traced):
    # TF1 BERT drops out a reshaped 2-D tensor, a Keras port the 3-D one: the same numbers in
    # another layout. As many, of the same dtype and distribution: fed reshaped, and the report says so.
    tf = tf2.tf
    path = _tape_golden(str(tmp_path / "tape.h5"))

    def step(inputs):
        return {"u": tf.random.uniform([3, 2]), "n": tf.random.normal([1, 3])}
    actual = tf2.replay(path, tf.function(step) if traced else step, variables=[tf.Variable(tf.zeros(3), name="w")])
    with tracekit.open(path) as g:
        raw_u = g.step(0)["random/dropout/random_uniform/RandomUniform:0"]
        raw_n = g.step(0)["random/noise/RandomStandardNormal:0"]
    got = actual.step(0)
    assert np.array_equal(got["fetch/u"], raw_u.reshape(3, 2)) and np.array_equal(got["fetch/n"], raw_n.reshape(1, 3))
    assert actual.meta["replay"]["reshaped_draws"] == {"dropout/random_uniform/RandomUniform:0": [[2, 3], [3, 2]],
                                                      "noise/RandomStandardNormal:0": [[3], [1, 3]]}
    result = tracekit.compare(path, actual)
    assert result.ok
    assert ("note: random draw dropout/random_uniform/RandomUniform:0 fed reshaped: the golden drew (2, 3), the port "
            "asks for (3, 2)") in result.report()


@pytest.mark.parametrize("traced", [False, True])
@pytest.mark.parametrize("first, said", [
    ("tf.random.uniform([3, 3])", r"the golden recorded float32 \(2, 3\) from dropout/random_uniform/RandomUniform:0, "
                                  r"the TF2 step asks for float32 \(3, 3\)"),  # another count
    ("tf.random.normal([2, 3])", r"the golden recorded a uniform draw \(dropout/random_uniform/RandomUniform:0\), the "
                                 r"TF2 step asks for a normal one")])  # another distribution
def test_a_draw_of_another_count_or_distribution_is_an_error(tf2, tmp_path, traced, first, said):
    tf = tf2.tf
    path = _tape_golden(str(tmp_path / "tape.h5"))

    def step(inputs):
        return {"u": eval(first, {"tf": tf}), "n": tf.random.normal([3])}
    with pytest.raises(tracekit.ReplayError, match=r"step 0, random draw 0 \(random_\w+\): " + said):
        tf2.replay(path, tf.function(step) if traced else step, variables=[tf.Variable(tf.zeros(3), name="w")])


def _dropout_golden(tf, path, steps=3):
    """TF1-style graph code (on TF 2's compat.v1) recorded with num_random_ops seeds: a dropout."""
    import tracekit.tf1

    with tf.Graph().as_default():
        with tracekit.tf1.record(path, seed=42, seed_mode="num_random_ops") as rec:
            x = tf.compat.v1.placeholder(tf.float32, [4, 5], name="x")
            w = tf.compat.v1.get_variable("w", [5], initializer=tf.compat.v1.constant_initializer(0.5))
            loss = tf.reduce_sum(tf.compat.v1.nn.dropout(x, rate=0.5) * w)
            train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
            with tf.compat.v1.Session() as sess:
                rec.session(sess)
                sess.run(tf.compat.v1.global_variables_initializer())
                for k in range(steps):
                    sess.run([train, loss], {x: np.random.RandomState(k).rand(4, 5).astype(np.float32)})
    return path


@pytest.mark.parametrize("traced", [True, False])
def test_seed_alignment_reproduces_dropout(tf2, tmp_path, traced):
    tf = tf2.tf
    path = _dropout_golden(tf, str(tmp_path / "dropout.h5"))
    var = tf.Variable(tf.zeros(5), name="w")
    optimizer = tf.keras.optimizers.SGD(0.1)
    optimizer.build([var])  # else the tf.function traces twice, and the retrace draws the next op seed

    def step(inputs):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.nn.dropout(inputs["x:0"], rate=0.5) * var)
        optimizer.apply_gradients([(tape.gradient(loss, var), var)])
        return loss
    actual = tf2.replay(path, tf.function(step) if traced else step, variables=[var], random="seed")
    result = tracekit.compare(path, actual)
    if traced:  # one graph op, like TF1's: its stream continues from step to step
        assert result.ok, result.report()
        assert result.tensor("random", "dropout/random_uniform/RandomUniform:0").steps == 3
    else:  # eager kernels are shared and cached : only the first step agrees
        assert (result.first_divergence.step, result.first_divergence.kind) == (1, "random")

    def shifted(inputs):  # one more random op (not a taped kind) first: the dropout gets the next op seed
        tf.random.categorical(tf.zeros([1, 2]), 1)
        return step(inputs)
    result = tracekit.compare(path, tf2.replay(path, tf.function(shifted), variables=[var], random="seed"))
    assert (result.first_divergence.step, result.first_divergence.kind) == (0, "random")


def test_initial_optimizer_state_and_step_count_are_loaded(tf2, tmp_path):
    # A golden recorded mid-run: Adam's m and v are not zero and global_step is 3, so the
    # port's first update (and its decayed learning rate) agree only if both were loaded.
    import tracekit.tf1

    tf = tf2.tf
    path = str(tmp_path / "midrun.h5")
    batches = [(np.random.RandomState(k).rand(2, 3).astype(np.float32),
                np.random.RandomState(100 + k).rand(2, 2).astype(np.float32)) for k in range(5)]
    with tf.Graph().as_default():
        with tracekit.tf1.record(path) as rec:
            x = tf.compat.v1.placeholder(tf.float32, [2, 3], name="x")
            t = tf.compat.v1.placeholder(tf.float32, [2, 2], name="t")
            init = tf.compat.v1.glorot_uniform_initializer(seed=1)
            loss = tf.reduce_mean(tf.square(tf.compat.v1.layers.dense(x, 2, name="dense", kernel_initializer=init) - t))
            step = tf.compat.v1.train.get_or_create_global_step()
            train = tf.compat.v1.train.AdamOptimizer(tf.compat.v1.train.polynomial_decay(0.01, step, 100)) \
                .minimize(loss, global_step=step)
            with tf.compat.v1.Session() as sess:
                sess.run(tf.compat.v1.global_variables_initializer())
                for bx, bt in batches[:3]:  # before the recorder is attached
                    sess.run(train, {x: bx, t: bt})
                rec.session(sess)
                for bx, bt in batches[3:]:
                    sess.run([train, loss], {x: bx, t: bt})
    with tracekit.open(path) as g:
        assert g.initial["var/global_step:0"] == 3 and np.abs(g.initial["slot/dense/kernel/Adam:0"]).min() > 0
    model = tf.keras.Sequential([tf.keras.layers.Dense(2, name="dense")])
    model(tf.zeros((2, 3)))
    schedule = tf.keras.optimizers.schedules.PolynomialDecay(0.01, 100, 0.0001)
    optimizer = tf.keras.optimizers.Adam(schedule, epsilon=1e-8)

    def train_step(inputs):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(inputs["x:0"]) - inputs["t:0"]))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    actual = tf2.replay(path, train_step, model=model)
    result = tracekit.compare(path, actual)
    assert result.ok, result.report()
    assert actual.step(0)["lr/learning_rate"] == schedule(3).numpy() != schedule(0).numpy()
    assert result.tensor("slot", "dense/kernel/Adam_1:0").steps == 2
    optimizer = tf.keras.optimizers.SGD(0.01)  # not the TF1 code's optimizer: its slots have no counterpart
    with pytest.raises(tracekit.ReplayError, match=r"the TF2 optimizer \(SGD\) has no slot for 4 of the golden's "
                       r"optimizer slots of the variables it updates:\n  only in the golden: dense/kernel/Adam:0 "
                       r"\(m of dense/kernel:0\)"):
        tf2.replay(path, train_step, model=model)


def test_a_tf_function_traced_in_an_earlier_replay_is_refused(tf2):
    tf = tf2.tf
    model, step = seed_example.make()
    traced = tf.function(step)
    tf2.replay(SEED, traced, model=model, steps=1)
    with pytest.raises(tracekit.ReplayError, match="traced during an earlier replay"):
        tf2.replay(SEED, traced, model=model, steps=1)


def test_regularization_is_compared_through_the_model(tf2):
    from tools.ports import estimator_model
    model, step = estimator_model.make()
    actual = tf2.replay(golden("estimator_model"), step, variables=model.variables, steps=1)  # no model=
    result = tracekit.compare(golden("estimator_model"), actual)
    assert result.ok, result.report()
    assert result.not_compared["loss/regularization"] == "pass model= to compare it with the sum of model.losses"


@pytest.mark.parametrize("jit", [True, False])
def test_every_k_steps_captured_in_full(tf2, jit):
    # Gradients, taps, variables and slots every 4th step; inputs, loss and learning rate every
    # step. Inside a tf.function the capture ops run on every step and keep only what is asked.
    model, step = seed_example.make(eager=not jit)
    actual = tf2.replay(golden("seed_example"), step, model=model, steps=10, every=4)
    for k in range(10):
        kinds = {key.split("/")[0] for key in actual.step(k)}
        assert kinds == ({"input", "tap", "loss", "lr", "grad", "var"} if k % 4 == 0 else {"input", "loss", "lr"}), k
    result = tracekit.compare(golden("seed_example"), actual, tracekit.Tolerance.training())
    assert result.ok, result.report()
    assert result.tensor("grad", "dense/kernel:0").steps == 3 and result.tensor("loss", "loss").steps == 10
    with pytest.raises(tracekit.UsageError, match="every must be an integer >= 1"):
        tf2.replay(golden("seed_example"), step, model=model, every=0)
