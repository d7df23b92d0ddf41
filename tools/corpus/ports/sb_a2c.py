"""sb_a2c in Keras: stable-baselines' MlpPolicy is two tanh towers of 64 (pi_fc0/pi_fc1 and
vf_fc0/vf_fc1, weights w and b), a policy head pi and a value head vf; its q head takes no part
in A2C's loss and is left out. The loss as A2C writes it: the policy gradient (the actions'
negative log-likelihood, by softmax cross-entropy, times the advantages) minus 0.01 times the
categorical entropy (stable-baselines' max-shifted form) plus 0.25 times the value loss; the
gradients clipped to a global norm of 0.5; Keras RMSprop with A2C's settings (rho 0.99, epsilon
1e-5, its constant learning rate). TF1's RMSProp starts its mean square at 1.0 where Keras starts
at 0, which makes the first updates far larger: the replay names that at the initial state, and
`TF1StartRMSprop` is the fix a team writes (`tf1_start=False` is the port before the fix).
`slip`, for the fingerprint tests: "vf-coef" weighs the value loss 0.5 (A2C's is 0.25),
"entropy-sign" adds the entropy bonus where A2C subtracts it; "vf-coef+entropy-sign" does both."""

HEADS = r"^model/q/.*"
LEARNING_RATE = 7e-4


def port(tf, tf1_start=True, slip=None):
    dense = tf.keras.layers.Dense
    towers = {name: dense(64, activation="tanh", name=name) for name in ("pi_fc0", "pi_fc1", "vf_fc0", "vf_fc1")}
    pi, vf = dense(2, name="pi"), dense(1, name="vf")
    obs = tf.keras.Input((4,))
    logits = pi(towers["pi_fc1"](towers["pi_fc0"](obs)))
    value = vf(towers["vf_fc1"](towers["vf_fc0"](obs)))
    model = tf.keras.Model(obs, [logits, value])

    class TF1StartRMSprop(tf.keras.optimizers.RMSprop):
        """Keras RMSprop whose mean square starts at 1.0, as TF1's RMSPropOptimizer's does."""

        def build(self, var_list):
            super().build(var_list)
            for rms in self.variables[1:]:  # after the iteration counter: one mean square per variable
                rms.assign(tf.ones_like(rms))

    make = TF1StartRMSprop if tf1_start else tf.keras.optimizers.RMSprop
    optimizer = make(LEARNING_RATE, rho=0.99, epsilon=1e-5)

    @tf.function
    def step(inputs):
        with tf.GradientTape() as tape:
            logits, value = model(inputs["train_model/input/Ob:0"])
            actions = tf.one_hot(inputs["loss/action_ph:0"], 2)
            neglogp = tf.nn.softmax_cross_entropy_with_logits(labels=actions, logits=logits)
            pg_loss = tf.reduce_mean(inputs["loss/advs_ph:0"] * neglogp)
            shifted = logits - tf.reduce_max(logits, axis=-1, keepdims=True)
            exp = tf.exp(shifted)
            z = tf.reduce_sum(exp, axis=-1, keepdims=True)
            entropy = tf.reduce_mean(tf.reduce_sum(exp / z * (tf.math.log(z) - shifted), axis=-1))
            vf_loss = tf.reduce_mean(tf.square(tf.squeeze(value[:, 0]) - inputs["loss/rewards_ph:0"]))
            slips = set((slip or "").split("+"))
            entropy_sign = 1.0 if "entropy-sign" in slips else -1.0
            loss = pg_loss + entropy_sign * entropy * 0.01 + vf_loss * (0.5 if "vf-coef" in slips else 0.25)
        grads, _ = tf.clip_by_global_norm(tape.gradient(loss, model.trainable_variables), 0.5)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss}
    return model, step, {"var_map": [(HEADS, None)]}
