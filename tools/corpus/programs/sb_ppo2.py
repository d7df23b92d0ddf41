"""stable-baselines 2.10 PPO2 ('MlpPolicy' on CartPole-v1, seed 0): minibatch epochs over each
rollout, its clipped surrogate loss (policy - entropy bonus + clipped value loss) differentiated
by tf.gradients, clipped by global norm, Adam. Prints, for each training step, the total loss the
optimizer minimizes, from the parts PPO2's own train step returns. argv: --updates N."""
import argparse

from stable_baselines import PPO2

parser = argparse.ArgumentParser()
parser.add_argument("--updates", type=int, default=2)
args = parser.parse_args()

model = PPO2("MlpPolicy", "CartPole-v1", seed=0, n_steps=16, nminibatches=2, noptepochs=2, n_cpu_tf_sess=1)
train_step = model._train_step


def printing(*a, **kw):
    out = train_step(*a, **kw)
    policy_loss, value_loss, entropy = out[:3]
    total = policy_loss - entropy * model.ent_coef + value_loss * model.vf_coef
    print("step loss %.9g" % total, flush=True)
    return out


model._train_step = printing
model.learn(total_timesteps=16 * args.updates)
