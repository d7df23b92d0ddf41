"""gpt2_accumulate in TF2, as a team ports gpt-2-simple's fine-tuning: the transformer written as a
tf.Module whose variables keep GPT-2's names and shapes (model/wte, model/h0/attn/c_attn/w of
shape [1, nx, nf], ...), so checkpoints still load; Keras Adam at TF1's epsilon; and the
accumulation TF2 code writes: the step loops over the micro-batches (the inputs' first axis),
adds their gradients up and applies the sum once. It returns each micro-batch's loss."""

import math

SIZES = dict(vocab=48, positions=16, width=16, heads=2, layers=2, lr=1e-3)  # the driver's


def port(tf, micro=3, **sizes):
    size = dict(SIZES, **sizes)
    vocab, positions, width, heads, layers = (size[n] for n in ("vocab", "positions", "width", "heads", "layers"))

    def variable(name, shape):
        return tf.Variable(tf.zeros(shape), name=name)  # the replay loads the golden's values

    def norm(x, g, b):
        u = tf.reduce_mean(x, axis=-1, keepdims=True)
        s = tf.reduce_mean(tf.square(x - u), axis=-1, keepdims=True)
        return (x - u) * tf.math.rsqrt(s + 1e-5) * g + b

    def conv1d(x, w, b):
        return tf.tensordot(x, w[0], 1) + b

    def gelu(x):
        return 0.5 * x * (1 + tf.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * tf.pow(x, 3))))

    class GPT2(tf.Module):
        def __init__(self):
            super().__init__(name="model")
            with tf.name_scope("model"):
                self.wte, self.wpe = variable("wte", [vocab, width]), variable("wpe", [positions, width])
                self.blocks = []
                for i in range(layers):
                    with tf.name_scope("h%d" % i):
                        made = {}
                        for part, shapes in (("ln_1", None), ("attn/c_attn", 3), ("attn/c_proj", 1), ("ln_2", None),
                                             ("mlp/c_fc", 4), ("mlp/c_proj", 1)):
                            with tf.name_scope(part):
                                if shapes is None:
                                    made[part] = (variable("g", [width]), variable("b", [width]))
                                else:
                                    rows = width * 4 if part == "mlp/c_proj" else width
                                    made[part] = (variable("w", [1, rows, width * shapes]),
                                                  variable("b", [width * shapes]))
                        self.blocks.append(made)
                with tf.name_scope("ln_f"):
                    self.ln_f = (variable("g", [width]), variable("b", [width]))

        def attention(self, x, block):
            q, k, v = tf.split(conv1d(x, *block["attn/c_attn"]), 3, axis=2)
            q, k, v = (tf.transpose(tf.reshape(t, [-1, positions, heads, width // heads]), [0, 2, 1, 3])
                       for t in (q, k, v))
            w = tf.matmul(q, k, transpose_b=True) * tf.math.rsqrt(float(width // heads))
            mask = tf.cast(tf.range(positions)[:, None] >= tf.range(positions), w.dtype)
            w = tf.nn.softmax(w * mask - 1e10 * (1 - mask))
            a = tf.reshape(tf.transpose(tf.matmul(w, v), [0, 2, 1, 3]), [-1, positions, width])
            return conv1d(a, *block["attn/c_proj"])

        def __call__(self, tokens):
            h = tf.gather(self.wte, tokens) + tf.gather(self.wpe, tf.range(positions))[None]
            for block in self.blocks:
                h = h + self.attention(norm(h, *block["ln_1"]), block)
                h = h + conv1d(gelu(conv1d(norm(h, *block["ln_2"]), *block["mlp/c_fc"])), *block["mlp/c_proj"])
            return tf.matmul(norm(h, *self.ln_f), self.wte, transpose_b=True)

    model = GPT2()
    optimizer = tf.keras.optimizers.Adam(size["lr"], epsilon=1e-8)

    @tf.function
    def step(inputs):
        tokens = inputs["context:0"]
        variables = model.trainable_variables
        total, losses = [tf.zeros_like(v) for v in variables], []
        for i in range(micro):
            with tf.GradientTape() as tape:
                logits = model(tokens[i])
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                    labels=tokens[i][:, 1:], logits=logits[:, :-1]))
            grads = tape.gradient(loss, variables)
            total = [t + tf.convert_to_tensor(g) for t, g in zip(total, grads)]
            losses.append(loss)
        optimizer.apply_gradients(zip(total, variables))
        return {"loss": tf.stack(losses)}
    return list(model.trainable_variables), step, {}
