# Modeled on keras-io examples/rl/actor_critic_cartpole.py; written for tessera. Keras 3
# form (the example is Keras 2 and records each episode on a tf.GradientTape): the same
# actor-critic model of two outputs (softmax actions, a critic value) called eagerly at each
# step to choose the action; the update after each episode is the same single Adam step on
# the same loss, sum over the episode of -log pi(a|s) * (return - value) plus the Huber loss
# of value and return (the gradient reaching the critic through both terms, as the tape's),
# written as a `compute_loss` override of the model and taken by `fit` on the episode as one
# batch, which every Keras backend runs. The gym environment is replaced by a deterministic
# NumPy cart-pole written here (CartPole-v0's dynamics, limits and reward; seeded resets).
# 128 hidden units as there; 25 episodes of at most 200 steps (until solved there), the
# running reward printed every 10.
import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops


class CartPole:
    """CartPole-v0: a pole on a cart pushed left or right; +1 per step until the pole leans
    over 12 degrees or the cart leaves +-2.4, at most 200 steps."""

    gravity, masscart, masspole, length, force_mag, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    theta_threshold, x_threshold, max_steps = 12 * 2 * np.pi / 360, 2.4, 200

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.state, self.steps = None, 0

    def reset(self):
        self.state, self.steps = self.rng.uniform(-0.05, 0.05, 4), 0
        return self.state.astype("float32")

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = self.force_mag if action == 1 else -self.force_mag
        total_mass = self.masspole + self.masscart
        polemass_length = self.masspole * self.length
        cos, sin = np.cos(theta), np.sin(theta)
        temp = (force + polemass_length * theta_dot ** 2 * sin) / total_mass
        theta_acc = (self.gravity * sin - cos * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * cos ** 2 / total_mass))
        x_acc = temp - polemass_length * theta_acc * cos / total_mass
        x, x_dot = x + self.tau * x_dot, x_dot + self.tau * x_acc
        theta, theta_dot = theta + self.tau * theta_dot, theta_dot + self.tau * theta_acc
        self.state, self.steps = np.array([x, x_dot, theta, theta_dot]), self.steps + 1
        done = bool(abs(x) > self.x_threshold or abs(theta) > self.theta_threshold
                    or self.steps >= self.max_steps)
        return self.state.astype("float32"), 1.0, done, {}


# Configuration parameters for the whole setup
seed = 42
gamma = 0.99  # Discount factor for past rewards
max_steps_per_episode = 10000
env = CartPole(seed)  # Create the environment
eps = np.finfo(np.float32).eps.item()  # Smallest number such that 1.0 + eps != 1.0

num_inputs = 4
num_actions = 2
num_hidden = 128

huber_loss = keras.losses.Huber(reduction="sum")


class ActorCritic(keras.Model):
    """The example's model; its tape's loss as compute_loss: y is (one-hot actions taken,
    normalized returns), y_pred (action probabilities, critic values)."""

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        taken, returns = y
        action_probs, critic_value = y_pred
        log_prob = ops.log(ops.sum(action_probs * taken, axis=1, keepdims=True))
        diff = returns - critic_value
        actor_losses = -log_prob * diff  # actor loss
        critic_losses = huber_loss(critic_value, returns)
        return ops.sum(actor_losses) + critic_losses


inputs = layers.Input(shape=(num_inputs,))
common = layers.Dense(num_hidden, activation="relu")(inputs)
action = layers.Dense(num_actions, activation="softmax")(common)
critic = layers.Dense(1)(common)

model = ActorCritic(inputs=inputs, outputs=[action, critic])
optimizer = keras.optimizers.Adam(learning_rate=0.01)
model.compile(optimizer=optimizer)

states_history = []
actions_history = []
rewards_history = []
running_reward = 0
episode_count = 0
episode_rewards = []

while True:  # Run until solved (25 episodes here)
    state = env.reset()
    episode_reward = 0
    for timestep in range(1, max_steps_per_episode):
        state = ops.expand_dims(ops.convert_to_tensor(state), 0)
        states_history.append(ops.convert_to_numpy(state)[0])

        # Predict action probabilities and estimated future rewards
        # from environment state
        action_probs, critic_value = model(state)

        # Sample action from action probability distribution
        p = np.squeeze(ops.convert_to_numpy(action_probs)).astype("float64")
        action = np.random.choice(num_actions, p=p / p.sum())
        actions_history.append(action)

        # Apply the sampled action in our environment
        state, reward, done, _ = env.step(action)
        rewards_history.append(reward)
        episode_reward += reward

        if done:
            break

    # Update running reward to check condition for solving
    running_reward = 0.05 * episode_reward + (1 - 0.05) * running_reward
    episode_rewards.append(episode_reward)

    # Calculate expected value from rewards
    # - At each timestep what was the total reward received after that timestep
    # - Rewards in the past are discounted by multiplying them with gamma
    # - These are the labels for our critic
    returns = []
    discounted_sum = 0
    for r in rewards_history[::-1]:
        discounted_sum = r + gamma * discounted_sum
        returns.insert(0, discounted_sum)

    # Normalize
    returns = np.array(returns)
    returns = (returns - np.mean(returns)) / (np.std(returns) + eps)

    # Backpropagation: one step on the episode, as the tape's apply_gradients
    states = np.stack(states_history).astype("float32")
    taken = np.eye(num_actions, dtype="float32")[actions_history]
    model.fit(states, [taken, returns[:, None].astype("float32")], batch_size=len(states),
              epochs=1, shuffle=False, verbose=0)

    # Clear the loss and reward history
    states_history.clear()
    actions_history.clear()
    rewards_history.clear()

    # Log details
    episode_count += 1
    if episode_count % 10 == 0:
        template = "running reward: {:.2f} at episode {}"
        print(template.format(running_reward, episode_count))

    if running_reward > 195:  # Condition to consider the task solved
        print("Solved at episode {}!".format(episode_count))
        break
    if episode_count >= 25:
        break

print("episode rewards:", episode_rewards)
assert all(1 <= r <= 200 for r in episode_rewards)
