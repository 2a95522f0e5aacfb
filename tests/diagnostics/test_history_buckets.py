"""MetricHistory: bounded buckets (exact for short runs, doubling width for long ones), the
non-finite record, and spike episodes kept out of the level series."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from app.diagnostics.history import MAX_BUCKETS, MAX_EPISODES, RING, MetricHistory


def steps_values(lo: int, hi: int, f=lambda s: s * 0.1):
    steps = np.arange(lo, hi + 1, dtype=np.int64)
    return steps, np.array([f(s) for s in steps], float)


def test_short_runs_are_kept_exactly() -> None:
    h = MetricHistory()
    h.add("reward", *steps_values(1, 5))
    s, v = h.series()
    assert s.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert v.tolist() == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5])
    assert (h.width, h.first_step, h.last_step, h.n_rows) == (1, 1, 5, 5)
    assert (h.gmin, h.gmax) == pytest.approx((0.1, 0.5))
    assert h.vmin.tolist() == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5])


def test_resent_steps_are_ignored() -> None:
    h = MetricHistory()
    h.add("reward", np.array([1, 2, 3]), np.array([1.0, 2.0, 3.0]))
    h.add("reward", np.array([2, 3, 4]), np.array([9.0, 9.0, 4.0]))
    h.add("reward", np.array([4]), np.array([9.0]))
    s, v = h.series()
    assert s.tolist() == [1, 2, 3, 4] and v.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert h.n_rows == 4 and h.last_step == 4 and h.gmax == 4.0


def test_long_runs_double_the_bucket_width_and_keep_min_max() -> None:
    h = MetricHistory()
    h.add("reward", *steps_values(0, 999, float))
    assert h.width == 8 and len(h.keys) == 125 <= MAX_BUCKETS
    s, v = h.series()
    assert s[0] == pytest.approx(3.5) and v[0] == pytest.approx(3.5)  # steps 0..7
    assert h.vmin[0] == 0.0 and h.vmax[0] == 7.0 and h.cnt[0] == 8
    assert s[-1] == pytest.approx(995.5) and h.cnt[-1] == 8
    assert (h.gmin, h.gmax) == (0.0, 999.0)


@pytest.mark.parametrize("batch", [1, 10, 100, 300])
def test_batches_end_in_the_same_buckets_as_one_shot(batch: int) -> None:
    one = MetricHistory()
    one.add("reward", *steps_values(1, 1000, lambda s: math.sin(s / 30)))
    h = MetricHistory()
    steps, values = steps_values(1, 1000, lambda s: math.sin(s / 30))
    for i in range(0, len(steps), batch):
        h.add("reward", steps[i:i + batch], values[i:i + batch])
    assert h.width == one.width and h.keys.tolist() == one.keys.tolist()
    assert h.series()[1] == pytest.approx(one.series()[1])
    assert h.cnt.tolist() == one.cnt.tolist()
    assert h.vmin.tolist() == one.vmin.tolist() and h.vmax.tolist() == one.vmax.tolist()


def test_an_existing_history_widens_for_a_large_batch() -> None:
    h = MetricHistory()
    h.add("reward", *steps_values(1, 100, float))
    h.add("reward", *steps_values(101, 1000, float))
    assert h.width == 8 and len(h.keys) <= MAX_BUCKETS
    assert h.cnt.sum() == 1000 and h.vsum.sum() == pytest.approx(sum(range(1, 1001)))


def test_non_finite_values_are_counted_and_kept_out_of_the_series() -> None:
    h = MetricHistory()
    h.add("loss", np.array([1, 2, 3, 4]), np.array([0.1, math.nan, math.inf, 0.4]))
    h.add("loss", np.array([5, 6]), np.array([-math.inf, 0.6]))
    assert h.nonfinite == [3, 2, 5, "nan"]
    assert h.series()[0].tolist() == [1.0, 4.0, 6.0] and h.n_rows == 6
    only_bad = MetricHistory()
    only_bad.add("loss", np.array([7]), np.array([math.inf]))
    assert only_bad.nonfinite == [1, 7, 7, "inf"] and len(only_bad.cnt) == 0
    assert only_bad.gmin is None and only_bad.first_step == 7


def spiky(n: int, spikes: dict[int, float], base: float = 1.0):
    steps = np.arange(1, n + 1, dtype=np.int64)
    values = base + 0.01 * (steps % 5)
    for s, v in spikes.items():
        values[s - 1] = v
    return steps, values


def test_an_isolated_spike_is_an_episode_not_a_level() -> None:
    h = MetricHistory()
    h.add("kl", *spiky(40, {20: 50.0}))
    assert h.all_episodes() == [[20, 20, 1, 50.0, 20]]
    assert 20 not in h.series()[0].tolist() and h.gmax == 50.0
    assert len(h.ring) == RING and h.ring[-1] == pytest.approx(1.0)


def test_only_spike_metrics_are_judged() -> None:
    h = MetricHistory()
    h.add("reward", *spiky(40, {20: 50.0}))
    assert h.all_episodes() == [] and 20 in h.series()[0].tolist()


def test_two_rows_are_a_spike_three_are_a_level_shift() -> None:
    two = MetricHistory()
    two.add("grad_norm", *spiky(40, {20: 50.0, 21: 60.0}))
    assert two.all_episodes() == [[20, 21, 2, 60.0, 21]]
    assert not {20, 21} & set(two.series()[0].tolist())
    three = MetricHistory()
    three.add("grad_norm", *spiky(40, {20: 50.0, 21: 70.0, 22: 60.0}))
    assert three.all_episodes() == [[20, 22, 3, 70.0, 21]]
    kept = set(three.series()[0].tolist())
    assert 22 in kept and not {20, 21} & kept  # from the third row on it is the level


def test_no_spikes_before_enough_reference_values() -> None:
    h = MetricHistory()
    h.add("kl", np.arange(1, 9), np.array([1.0] * 7 + [50.0]))
    assert h.all_episodes() == []  # 7 positive values before it: below the 8 needed
    g = MetricHistory()
    g.add("kl", np.arange(1, 10), np.array([1.0] * 8 + [50.0]))
    assert g.all_episodes() == [[9, 9, 1, 50.0, 9]]


def test_zero_values_do_not_count_as_reference() -> None:
    h = MetricHistory()
    h.add("kl", np.arange(1, 12), np.array([0.0] * 4 + [1.0] * 6 + [50.0]))
    assert h.all_episodes() == []  # 7 positive reference values only (zeros ignored)


def test_a_spike_must_also_be_far_outside_the_spread() -> None:
    noisy = np.array([1.0, 20.0, 1.0, 20.0, 1.0, 20.0, 1.0, 20.0, 1.0, 20.0, 15.0])
    h = MetricHistory()
    h.add("kl", np.arange(1, 12), noisy)
    assert h.all_episodes() == []


def test_an_episode_open_at_the_batch_end_continues_into_the_next() -> None:
    h = MetricHistory()
    steps, values = spiky(40, {39: 50.0, 40: 80.0})
    h.add("kl", steps, values)
    assert h.open_ep == [39, 40, 2, 80.0, 40] and h.episodes == []
    h.add("kl", np.array([41, 42]), np.array([60.0, 1.0]))
    assert h.open_ep is None and h.episodes == [[39, 41, 3, 80.0, 40]]


def test_old_episodes_are_dropped_but_counted() -> None:
    h = MetricHistory()
    spikes = {10 + 8 * i: 50.0 for i in range(MAX_EPISODES + 3)}
    spikes[10 + 8 * (MAX_EPISODES + 3)] = 50.0
    spikes[11 + 8 * (MAX_EPISODES + 3)] = 50.0
    spikes[12 + 8 * (MAX_EPISODES + 3)] = 50.0  # one sustained episode at the end
    h.add("kl", *spiky(20 + 8 * (MAX_EPISODES + 4), spikes))
    assert len(h.episodes) == MAX_EPISODES
    assert h.n_isolated_closed == 4 and h.n_shift_closed == 0
    assert h.episodes[-1][2] == 3 and h.episodes[0][0] == 10 + 8 * 4


def test_json_round_trip_keeps_everything() -> None:
    h = MetricHistory()
    h.add("kl", *spiky(300, {100: 50.0, 200: 70.0}))
    h.add("kl", np.array([301, 302]), np.array([math.nan, 80.0]))
    blob = json.loads(json.dumps(h.to_json(), allow_nan=False))
    back = MetricHistory.from_json({**blob, "unknown_field": 1})
    for k in ("width", "last_step", "first_step", "n_rows", "gmin", "gmax", "nonfinite", "ring",
              "episodes", "open_ep", "n_isolated_closed", "n_shift_closed"):
        assert getattr(back, k) == getattr(h, k), k
    for k in ("keys", "vsum", "ssum", "cnt", "vmin", "vmax"):
        assert getattr(back, k).tolist() == getattr(h, k).tolist(), k
    assert back.keys.dtype == np.int64 and back.cnt.dtype == float
    assert not hasattr(back, "unknown_field")
    ints = MetricHistory.from_json({"keys": [1, 2], "cnt": [1, 1], "vsum": [2, 3], "ssum": [1, 2],
                                    "vmin": [2, 3], "vmax": [2, 3]})
    assert all(getattr(ints, k).dtype == float for k in ("cnt", "vsum", "ssum", "vmin", "vmax"))


def test_empty_history_reads_as_empty() -> None:
    h = MetricHistory()
    h.add("reward", np.zeros(0, np.int64), np.zeros(0))
    assert h.series()[0].tolist() == [] and h.first_step is None and h.n_rows == 0
