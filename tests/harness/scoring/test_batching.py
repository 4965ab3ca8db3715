"""Token-budget calls (harness.scoring.batching): packing, sharing by tokens, out-of-memory back-off."""

from __future__ import annotations

import pytest

from harness.scoring.batching import (CallRunner, Prepared, SimulatedOutOfMemory, Throughput, length_order, pack,
                                      padded_tokens, split_by_tokens)
from harness.scoring.data import ModelError


def _prepared(lengths):
    return [Prepared(i, f"item{i}", f"key{i}", n, False, None) for i, n in enumerate(lengths)]


def test_pack_bounds_padded_tokens_and_inputs_and_keeps_order():
    lengths = [900, 800, 400, 390, 380, 100, 90, 10]
    calls = list(pack(range(len(lengths)), lambda i: lengths[i], budget=1600, max_inputs=3))
    assert [i for call in calls for i in call] == list(range(len(lengths)))
    for call in calls:
        assert len(call) <= 3
        assert len(call) == 1 or padded_tokens([lengths[i] for i in call]) <= 1600
    # 2 x 900 > 1600: alone; 2 x 800 fits, a third makes 2400; 3 x 390, then the count bound
    assert calls == [[0], [1, 2], [3, 4, 5], [6, 7]]


def test_an_input_longer_than_the_budget_is_a_call_of_its_own():
    assert list(pack([5000, 10], lambda n: n, budget=1000, max_inputs=16)) == [[5000], [10]]


def test_longest_first_packing_pads_less_than_pool_order():
    lengths = [100, 8000, 120, 7900, 110, 8100, 90, 7800] * 4
    in_pool_order = sum(padded_tokens([lengths[i] for i in call])
                        for call in pack(range(len(lengths)), lambda i: lengths[i], None, 4))
    ordered = length_order(range(len(lengths)), lengths)
    by_length = sum(padded_tokens([lengths[i] for i in call]) for call in pack(ordered, lambda i: lengths[i], None, 4))
    assert by_length < 0.6 * in_pool_order
    assert by_length / sum(lengths) <= 1.05


def test_split_by_tokens_balances_tokens_not_counts():
    lengths = [32000] + [1000] * 32
    shares = split_by_tokens(range(len(lengths)), lengths, 2)
    loads = [sum(lengths[i] for i in share) for share in shares]
    assert sorted(i for share in shares for i in share) == list(range(len(lengths)))
    assert max(loads) == 32000 and min(loads) == 32000  # by count it would be 17 and 16 inputs: 48000 vs 16000
    assert len(shares[0]) == 1 and len(shares[1]) == 32


def test_out_of_memory_halves_the_call_until_it_fits_and_is_recorded():
    seen = []

    def forward(batch):
        width = padded_tokens([p.length for p in batch])
        if width > 1000:
            raise SimulatedOutOfMemory("too large")
        seen.append([p.index for p in batch])
        return [[1.0]] * len(batch), [False] * len(batch)

    throughput = Throughput()
    runner = CallRunner(forward, budget=4000, max_inputs=16, throughput=throughput)
    done = [p.index for batch, _ in runner.calls(_prepared([400] * 8 + [100] * 8)) for p in batch]
    assert sorted(done) == list(range(16)) and done == sorted(done)
    assert throughput.backoffs and throughput.backoffs[0]["budget_after"] == throughput.backoffs[0]["padded_tokens"] // 2
    assert all(padded_tokens([400 if i < 8 else 100 for i in call]) <= 1000 for call in seen)
    assert throughput.inputs == 16 and throughput.batches == len(seen)


def test_one_input_that_cannot_fit_names_itself_and_its_length():
    runner = CallRunner(lambda batch: (_ for _ in ()).throw(SimulatedOutOfMemory("no")), budget=None, max_inputs=4,
                        throughput=Throughput())
    with pytest.raises(ModelError, match=r"'item0' \(5000 tokens\) does not fit"):
        list(runner.calls(_prepared([5000])))


def test_the_simulated_limit_triggers_the_same_path():
    throughput = Throughput()
    runner = CallRunner(lambda batch: ([[0.0]] * len(batch), [False] * len(batch)), budget=None, max_inputs=8,
                        throughput=throughput, simulate_memory_tokens=250)
    calls = [[p.index for p in batch] for batch, _ in runner.calls(_prepared([100] * 8))]
    assert all(len(call) * 100 <= 250 for call in calls) and len(throughput.backoffs) >= 1


def test_a_model_failure_is_one_line_not_a_back_off():
    def forward(batch):
        raise ValueError("bad pixel values\nwith a second line")

    runner = CallRunner(forward, budget=None, max_inputs=8, throughput=Throughput())
    with pytest.raises(ModelError, match=r"^ValueError: bad pixel values$"):
        list(runner.calls(_prepared([10, 10])))


def test_a_lowered_budget_applies_to_the_calls_after_it():
    failures = []

    def forward(batch):
        if padded_tokens([p.length for p in batch]) > 400:
            failures.append(len(batch))
            raise SimulatedOutOfMemory("too large")
        return [[1.0]] * len(batch), [False] * len(batch)

    throughput = Throughput()
    runner = CallRunner(forward, budget=800, max_inputs=16, throughput=throughput)
    list(runner.calls(_prepared([100] * 64)))
    assert len(throughput.backoffs) == 1 and failures == [8]  # once lowered to 400, no later call fails
    assert throughput.inputs == 64
