"""stable-baselines 2.10 A2C ('MlpPolicy' on CartPole-v1, seed 0): its own session loop, its
composite loss (policy gradient - entropy bonus + value loss) differentiated by tf.gradients,
clipped by global norm, RMSProp. Prints, for each training step, the total loss the optimizer
minimizes, from the parts A2C's own train step returns. argv: --steps N (updates)."""
import argparse

from stable_baselines import A2C

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
args = parser.parse_args()

model = A2C("MlpPolicy", "CartPole-v1", seed=0, n_steps=5, n_cpu_tf_sess=1)
train_step = model._train_step


def printing(*a, **kw):
    policy_loss, value_loss, entropy = train_step(*a, **kw)
    total = policy_loss - entropy * model.ent_coef + value_loss * model.vf_coef
    print("step loss %.9g" % total, flush=True)
    return policy_loss, value_loss, entropy


model._train_step = printing
model.learn(total_timesteps=5 * args.steps)
