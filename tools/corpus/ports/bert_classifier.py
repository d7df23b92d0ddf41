"""bert_classifier in Keras, as a team ports google-research/bert's fine-tuning: Keras layers
named like BERT's scopes (Embedding, Dense, LayerNormalization at BERT's epsilon 1e-12, Dropout
on), the classifier a Keras Dense (its kernel is TF1's output_weights transposed: the var_map the
replay proposed, pasted), and BERT's AdamWeightDecayOptimizer written out by hand, as no Keras
optimizer reproduces it (it neither bias-corrects nor decays LayerNorm and bias weights): its m
and v are variables of its own, named after their parameters, and its step counter is
`global_step`. The learning rate is BERT's polynomial decay to 0 over the run's train steps."""

import math

SIZES = dict(hidden=32, heads=2, layers=2, intermediate=64, vocab=64, seq=16, positions=None, lr=1e-3)  # the driver's
LABELS, TYPES = 3, 16
TRAIN_STEPS = 1_000_000_000  # the driver's --train-steps
NUDGE_AT = 7
LATE_FROM = 20  # the "late" slip's schedule runs one step behind from this step on


def gelu(tf, x):
    return x * 0.5 * (1.0 + tf.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * tf.pow(x, 3))))


def port(tf, slip=None, train_steps=TRAIN_STEPS, **sizes):
    """`sizes` as the driver's options (hidden=768, layers=12, ..., positions=512: BERT-base).
    `slip`, for the wrong ports of the benchmark (tools/bench_bert.py) and the fingerprint tests: "decay"
    leaves the weight decay out; "nudge" moves one word embedding by 1e-3 in the step whose counter
    first reads NUDGE_AT or more, once; "scale" scales the first encoder layer's weights by 1 + 1e-3
    after that step; "late" takes the learning rate one step late once the counter reads LATE_FROM
    (the driver's --train-steps as `train_steps`: with few, the polynomial decay moves the rate at
    every step). The counter is the one the rate reads: a replay moves it a step on where TF1's
    racy read of global_step saw it moved (record/counter_reads.py), so these take effect at the
    step where the golden's rate did, step NUDGE_AT or LATE_FROM or the one before;
    "decay-all" decays LayerNorm and bias weights too (an empty exclusion list); "epsilon" is
    Adam's 1e-8 instead of BERT's 1e-6; "bias-correction" corrects m and v as Keras' AdamW does."""
    import tracekit.tf2

    keras = tf.keras
    size = dict(SIZES, **sizes)
    HIDDEN, HEADS, LAYERS, INTERMEDIATE, VOCAB, SEQ = (size[name] for name in (
        "hidden", "heads", "layers", "intermediate", "vocab", "seq"))
    POSITIONS, RATE = size["positions"] or SEQ, size["lr"]

    class Attention(keras.layers.Layer):
        def __init__(self, name):
            super().__init__(name=name)
            self.query, self.key, self.value = (keras.layers.Dense(HIDDEN, name=n) for n in ("query", "key", "value"))
            self.dropout = keras.layers.Dropout(0.1)

        def call(self, x, adder, training):
            def heads(t):
                return tf.transpose(tf.reshape(t, [-1, SEQ, HEADS, HIDDEN // HEADS]), [0, 2, 1, 3])
            scores = tf.matmul(heads(self.query(x)), heads(self.key(x)), transpose_b=True)
            probs = tf.nn.softmax(scores / math.sqrt(HIDDEN // HEADS) + adder)
            context = tf.matmul(self.dropout(probs, training=training), heads(self.value(x)))
            return tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [-1, SEQ, HIDDEN])

    class Block(keras.layers.Layer):
        """Dense, dropout, then LayerNorm of the sum with what came in."""

        def __init__(self, name):
            super().__init__(name=name)
            self.dense = keras.layers.Dense(HIDDEN, name="dense")
            self.dropout = keras.layers.Dropout(0.1)
            self.norm = keras.layers.LayerNormalization(epsilon=1e-12, name="LayerNorm")

        def call(self, x, residual, training):
            return self.norm(self.dropout(self.dense(x), training=training) + residual)

    class Scope(keras.layers.Layer):
        """A named group of layers, as BERT's variable scopes group its weights; calling it runs `run`."""

        def __init__(self, name, run, **layers):
            super().__init__(name=name)
            self.run = run
            for attribute, layer in layers.items():
                setattr(self, attribute, layer)

        def call(self, *args):
            return self.run(self, *args)

    def attention(scope, x, adder, training):
        return scope.out(scope.self_(x, adder, training), x, training)

    def intermediate(scope, x):
        return gelu(tf, scope.dense(x))

    class Layer(keras.layers.Layer):
        def __init__(self, name):
            super().__init__(name=name)
            self.attention = Scope("attention", attention, self_=Attention("self"), out=Block("output"))
            self.intermediate = Scope("intermediate", intermediate, dense=keras.layers.Dense(INTERMEDIATE, name="dense"))
            self.output_block = Block("output")

        def call(self, x, adder, training):
            attended = self.attention(x, adder, training)
            return self.output_block(self.intermediate(attended), attended, training)

    def encoder(scope, x, adder, training):
        for layer in scope.layers_:
            x = layer(x, adder, training)
        return x

    def pooler(scope, x):
        return scope.dense(x[:, 0])

    class Embeddings(keras.layers.Layer):
        def __init__(self):
            super().__init__(name="embeddings")
            self.words = keras.layers.Embedding(VOCAB, HIDDEN, name="word_embeddings")
            self.norm = keras.layers.LayerNormalization(epsilon=1e-12, name="LayerNorm")
            self.dropout = keras.layers.Dropout(0.1)

        def build(self, _):
            self.types = self.add_weight(name="token_type_embeddings", shape=(TYPES, HIDDEN))
            self.positions = self.add_weight(name="position_embeddings", shape=(POSITIONS, HIDDEN))

        def call(self, ids, segments, training):
            # token types by a one-hot product, as BERT: its gradient is dense, where an Embedding's
            # rows (each type repeated) would count twice in clip_by_global_norm's norm
            types = tf.matmul(tf.one_hot(tf.reshape(segments, [-1]), TYPES), self.types)
            x = self.words(ids) + tf.reshape(types, [-1, SEQ, HIDDEN]) + self.positions[None, :SEQ]
            return self.dropout(self.norm(x), training=training)

    class Bert(keras.Model):
        def __init__(self):
            super().__init__(name="bert")
            self.embeddings = Embeddings()
            self.encoder = Scope("encoder", encoder, layers_=[Layer("layer_%d" % i) for i in range(LAYERS)])
            self.pooler = Scope("pooler", pooler, dense=keras.layers.Dense(HIDDEN, activation="tanh", name="dense"))
            self.head_dropout = keras.layers.Dropout(0.1)
            self.classifier = keras.layers.Dense(LABELS, name="classifier")

        def call(self, ids, mask, segments, training=False):
            x = self.embeddings(ids, segments, training)
            adder = (1.0 - tf.cast(mask[:, None, None, :], tf.float32)) * -10000.0
            pooled = self.pooler(self.encoder(x, adder, training))
            return self.classifier(self.head_dropout(pooled, training=training))

    class AdamWeightDecay(tf.Module):
        """BERT's optimizer line by line: no bias correction, decay added to the step."""

        def __init__(self, params, rate=1e-3, decay=0.01, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                     exclude=("LayerNorm", "layer_norm", "bias"), corrected=False):
            self.params = params
            self.m = [tf.Variable(tf.zeros_like(p), trainable=False, name=p.name[:-2] + "/adam_m") for p in params]
            self.v = [tf.Variable(tf.zeros_like(p), trainable=False, name=p.name[:-2] + "/adam_v") for p in params]
            self.global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
            self.rate, self.decay, self.beta_1, self.beta_2, self.epsilon = rate, decay, beta_1, beta_2, epsilon
            self.decayed = [not any(word in p.name for word in exclude) for p in params]
            self.corrected = corrected

        def learning_rate(self):
            at = self.global_step - tf.cast(slip == "late" and self.global_step >= LATE_FROM, tf.int64)
            done = tf.minimum(tf.cast(at, tf.float32), train_steps) / train_steps
            return self.rate * (1.0 - done)

        def apply(self, grads):
            lr = self.learning_rate()
            t = tf.cast(self.global_step + 1, tf.float32)
            correction = tf.sqrt(1.0 - self.beta_2 ** t) / (1.0 - self.beta_1 ** t) if self.corrected else 1.0
            for grad, param, m, v, decayed in zip(grads, self.params, self.m, self.v, self.decayed):
                grad = tf.convert_to_tensor(grad)
                next_m = self.beta_1 * m + (1.0 - self.beta_1) * grad
                next_v = self.beta_2 * v + (1.0 - self.beta_2) * tf.square(grad)
                step = lr * correction * next_m / (tf.sqrt(next_v) + self.epsilon)
                if decayed:
                    step += lr * self.decay * param
                param.assign(param - step)
                m.assign(next_m)
                v.assign(next_v)
            self.global_step.assign_add(1)
            return lr

    model = Bert()
    blank = tf.zeros([4, SEQ], tf.int32)
    model(blank, blank, blank)
    params = model.trainable_variables
    optimizer = AdamWeightDecay(params, rate=RATE, decay=0.0 if slip == "decay" else 0.01,
                                epsilon=1e-8 if slip == "epsilon" else 1e-6,
                                exclude=() if slip == "decay-all" else ("LayerNorm", "layer_norm", "bias"),
                                corrected=slip == "bias-correction")

    fired = tf.Variable(False, trainable=False, name="slip_fired")  # "nudge" and "scale" act once

    @tf.function
    def step(inputs):
        with tf.GradientTape() as tape:
            logits = model(inputs["input_ids:0"], inputs["input_mask:0"], inputs["segment_ids:0"], training=True)
            labels = tf.one_hot(inputs["label_ids:0"], LABELS)
            loss = tf.reduce_mean(-tf.reduce_sum(labels * tf.nn.log_softmax(logits), axis=-1))
        grads, _ = tf.clip_by_global_norm(tape.gradient(loss, params), 1.0)
        at = optimizer.global_step.read_value()
        hit = tf.logical_and(at >= NUDGE_AT, tf.logical_not(fired.read_value()))
        if slip == "nudge":
            words = model.embeddings.words.embeddings
            moved = tf.cast(hit, words.dtype) * 1e-3
            words.assign_add(tf.scatter_nd([[0, 0]], tf.reshape(moved, [1]), words.shape))
        fired.assign(tf.logical_or(fired, at >= NUDGE_AT))
        rate = optimizer.apply(grads)
        if slip == "scale":
            factor = 1.0 + 1e-3 * tf.cast(hit, tf.float32)
            for weight in model.encoder.layers_[0].trainable_variables:
                weight.assign(weight * factor)
        return {"loss": loss, "lr": rate}

    # as the replay proposed it (docs/PORTS.md), pasted: the classifier's kernel is TF1's output_weights transposed
    var_map = {
        "output_bias:0": "bert/classifier/bias:0",  # same shape (3,): the only one left on both sides
        "output_weights:0": tracekit.tf2.transpose("output_weights:0", "bert/classifier/kernel:0"),  # transposed
    }
    return params + optimizer.m + optimizer.v + [optimizer.global_step], step, {"var_map": var_map}
