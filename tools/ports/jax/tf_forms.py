"""What a team porting TF1 code to optax writes once and reuses: TF's forms of the optimizers
whose optax counterparts compute something slightly different.

- `tf_adam`: TF's Adam. optax.adam adds epsilon to the bias-corrected sqrt(nu_hat); TF1's
  AdamOptimizer and Keras' Adam fold the bias correction into the step size and add epsilon to
  sqrt(nu) ("epsilon hat"). Its state is optax's own (count, mu, nu), so it pairs as optax.adam's.
- `FusedBatchNorm`: batch norm as TF1's fused kernel trains it (slim's on images): the moving
  variance fed the batch's variance with Bessel's correction, as flax's BatchNorm does not.
"""

import jax
import jax.numpy as jnp
import optax
from flax import linen as nn


def scale_by_tf_adam(b1=0.9, b2=0.999, eps=1e-7):
    def init(params):
        zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
        return optax.ScaleByAdamState(count=jnp.zeros([], jnp.int32), mu=zeros,
                                      nu=jax.tree_util.tree_map(jnp.zeros_like, params))

    def update(updates, state, params=None):
        count = state.count + 1
        mu = jax.tree_util.tree_map(lambda m, g: m + (g - m) * (1 - b1), state.mu, updates)
        nu = jax.tree_util.tree_map(lambda v, g: v + (g * g - v) * (1 - b2), state.nu, updates)
        t = count.astype(jnp.float32)
        scale = jnp.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        out = jax.tree_util.tree_map(lambda m, v: scale * m / (jnp.sqrt(v) + eps), mu, nu)
        return out, optax.ScaleByAdamState(count=count, mu=mu, nu=nu)
    return optax.GradientTransformation(init, update)


def tf_adam(learning_rate, b1=0.9, b2=0.999, eps=1e-7):
    """TF's Adam as an optax transformation (wrap it in optax.inject_hyperparams to expose its rate)."""
    return optax.chain(scale_by_tf_adam(b1, b2, eps), optax.scale_by_learning_rate(learning_rate))


class FusedBatchNorm(nn.Module):
    """Batch norm as TF1's fused kernel trains it (slim's batch_norm on NHWC images): the batch
    normalized by its biased variance, the moving variance fed the unbiased one (n / (n - 1)),
    the averages moved as `moving -= (moving - batch) * (1 - decay)` with 1 - decay in float32.
    flax's BatchNorm keeps the biased variance. Its variables are flax BatchNorm's (scale, bias;
    batch_stats mean, var), so it pairs as one."""

    decay: float = 0.997
    epsilon: float = 1e-3
    use_running_average: bool = False

    @nn.compact
    def __call__(self, x):
        features = x.shape[-1]
        scale = self.param("scale", nn.initializers.ones, (features,))
        bias = self.param("bias", nn.initializers.zeros, (features,))
        moving_mean = self.variable("batch_stats", "mean", lambda: jnp.zeros((features,), jnp.float32))
        moving_var = self.variable("batch_stats", "var", lambda: jnp.ones((features,), jnp.float32))
        if self.use_running_average:
            mean, var = moving_mean.value, moving_var.value
        else:
            axes = tuple(range(x.ndim - 1))
            mean = x.mean(axes)
            var = ((x - mean) ** 2).mean(axes)
            n = x.size // features
            if not self.is_initializing():
                rate = jnp.float32(1) - jnp.float32(self.decay)
                moving_mean.value = moving_mean.value - (moving_mean.value - mean) * rate
                moving_var.value = moving_var.value - (moving_var.value - var * (n / (n - 1))) * rate
        return (x - mean) * jax.lax.rsqrt(var + self.epsilon) * scale + bias
