"""dopamine-rl 2.0.5: Dopamine's DQNAgent (its own graph: an online and a target Q-network of
gym_lib's CartPole network, a circular replay buffer sampled by a tf.py_func through a staging
area, a Huber loss on the TD error, TF1's centered RMSProp) driven through its own agent API
(begin_episode / step / end_episode, as Dopamine's Runner drives it) on gym's CartPole. Training
runs start once the buffer holds 32 transitions, every 2 agent steps; the target network is
synced every 8. argv: --steps N (environment steps)."""
import argparse

import numpy as np
import tensorflow as tf
from dopamine.agents.dqn import dqn_agent
from dopamine.discrete_domains import gym_lib

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=40)
args = parser.parse_args()
np.random.seed(0)  # the replay buffer samples with numpy, the agent explores with Python's random
import random  # noqa: E402

random.seed(0)
tf.compat.v1.set_random_seed(1)
environment = gym_lib.create_gym_environment("CartPole")
environment.environment.seed(0)
with tf.compat.v1.Session() as session:
    agent = dqn_agent.DQNAgent(
        session, num_actions=environment.action_space.n, observation_shape=(4, 1),
        observation_dtype=tf.float64, stack_size=1,  # gym_lib gin constants
        network=gym_lib.cartpole_dqn_network, min_replay_history=32, update_period=2, target_update_period=8,
        epsilon_decay_period=100, optimizer=tf.compat.v1.train.RMSPropOptimizer(
            learning_rate=0.001, decay=0.95, momentum=0.0, epsilon=1e-5, centered=True))
    session.run(tf.compat.v1.global_variables_initializer())
    observation = environment.reset()
    action = agent.begin_episode(observation)
    for _ in range(args.steps):
        observation, reward, done, _ = environment.step(action)
        if done:
            agent.end_episode(reward)
            action = agent.begin_episode(environment.reset())
        else:
            action = agent.step(reward, observation)
print("trained", flush=True)
