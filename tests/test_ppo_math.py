"""Sparse-PPO's math against hand-derived values: KL-shaped token rewards, GAE, the clipped
surrogate (its value and where its gradient vanishes) and the clipped value loss."""

import math

import pytest

torch = pytest.importorskip("torch")

from rubriq.training.ppo import gae, masked_whiten, policy_loss, token_rewards, value_loss  # noqa: E402


def test_token_rewards_put_the_terminal_reward_on_each_rows_last_valid_token():
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    logp = torch.tensor([[-1.0, -1.0, -1.0], [-2.0, -5.0, -5.0]])
    ref = torch.tensor([[-1.5, -1.0, -0.5], [-1.0, -9.0, -9.0]])
    r = token_rewards(torch.tensor([1.0, 0.5]), logp, ref, mask, kl_coef=0.1)
    # -beta (logp - ref): row 0: -0.05, 0, +0.05 (+1 on the last); row 1: -0.1 * (-2 + 1) + 0.5, padding 0
    assert r.flatten().tolist() == pytest.approx([-0.05, 0.0, 1.05, 0.6, 0.0, 0.0])


def test_gae_matches_a_hand_computation_with_discount_and_padding():
    rewards = torch.tensor([[0.0, 0.0, 1.0], [2.0, 0.0, 0.0]])
    values = torch.tensor([[0.1, 0.2, 0.3], [0.5, 9.0, 9.0]])  # padded values must be ignored
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    gamma, lam = 0.9, 0.8
    adv, ret = gae(rewards, values, mask, gamma, lam)
    d2 = 1.0 - 0.3
    d1 = 0.0 + gamma * 0.3 - 0.2
    d0 = 0.0 + gamma * 0.2 - 0.1
    a2, a1 = d2, d1 + gamma * lam * d2
    a0 = d0 + gamma * lam * a1
    assert adv[0].tolist() == pytest.approx([a0, a1, a2])
    assert ret[0].tolist() == pytest.approx([a0 + 0.1, a1 + 0.2, a2 + 0.3])
    assert adv[1].tolist() == pytest.approx([2.0 - 0.5, 0.0, 0.0]) and ret[1, 0].item() == pytest.approx(2.0)


def test_clipped_surrogate_value_and_zero_gradient_outside_the_trust_region():
    mask = torch.ones(1, 4)
    old = torch.zeros(1, 4)
    # ratios e^0.5 (~1.65), e^-0.5 (~0.61), e^0.1, e^-0.1 with advantages +1, -1, +1, -1
    new = torch.tensor([[0.5, -0.5, 0.1, -0.1]], requires_grad=True)
    adv = torch.tensor([[1.0, -1.0, 1.0, -1.0]])
    loss, clipfrac = policy_loss(new, old, adv, mask, clip_range=0.2)
    # token 0: min(1.65, 1.2) * 1 -> 1.2 (clipped); token 1: min(-0.61, -0.8) -> -0.8 (clipped)
    expected = -(1.2 - 0.8 + math.exp(0.1) - math.exp(-0.1)) / 4
    assert loss.item() == pytest.approx(expected)
    assert clipfrac.item() == pytest.approx(0.5)
    loss.backward()
    g = new.grad[0].tolist()
    assert g[0] == 0.0 and g[1] == 0.0  # clipped tokens: no gradient
    assert g[2] == pytest.approx(-math.exp(0.1) / 4) and g[3] == pytest.approx(math.exp(-0.1) / 4)


def test_pessimistic_side_is_not_clipped():
    # a ratio beyond 1 + eps with a NEGATIVE advantage keeps its (larger) penalty and gradient
    new = torch.tensor([[0.5]], requires_grad=True)
    loss, clipfrac = policy_loss(new, torch.zeros(1, 1), torch.tensor([[-1.0]]), torch.ones(1, 1), 0.2)
    assert loss.item() == pytest.approx(math.exp(0.5)) and clipfrac.item() == 0.0
    loss.backward()
    assert new.grad.item() == pytest.approx(math.exp(0.5))


def test_value_loss_takes_the_larger_of_clipped_and_unclipped_errors():
    values, old, returns = torch.tensor([[1.0, 0.5]]), torch.tensor([[0.0, 0.4]]), torch.tensor([[0.0, 1.0]])
    vl = value_loss(values, old, returns, torch.ones(1, 2), clip_range_value=0.2)
    # token 0: unclipped (1-0)^2 = 1, clipped (0.2-0)^2 = 0.04 -> 1; token 1: (0.5-1)^2 = .25, (0.5-1)^2 -> .25
    assert vl.item() == pytest.approx(0.5 * (1.0 + 0.25) / 2)


def test_whitening_ignores_padding():
    x = torch.tensor([[1.0, 3.0, 100.0]])
    w = masked_whiten(x, torch.tensor([[1.0, 1.0, 0.0]]))
    assert w[0].tolist() == pytest.approx([-1.0, 1.0, 0.0], abs=1e-6)
