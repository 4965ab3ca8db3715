"""The input loader (harness.scoring.loader): worker processes give what the model's thread gives, in order,
with the per-pool state each input was prepared under."""

from __future__ import annotations

from harness.scoring.batching import Prepared
from harness.scoring.loader import InputLoader


class Doubler:
    """A preparer: an input's length is its text's length, times ``factor`` (a per-pool attribute)."""

    factor = 1

    def prepare(self, index, key, item, yardstick):
        import os

        return Prepared(index, item, key, len(item) * self.factor, False, os.getpid())


def test_workers_prepare_in_order_with_the_pool_state_and_elsewhere():
    tasks = [(i, f"k{i}", "x" * (i % 7 + 1), 0) for i in range(23)]
    inline = list(InputLoader(Doubler(), 0).prepared(tasks, {"factor": 3}))
    loader = InputLoader(Doubler(), 2, ahead=4)
    try:
        first = list(loader.prepared(tasks, {"factor": 3}))
        second = list(loader.prepared(tasks[:5], {"factor": 5}))  # the same workers, the next pool's state
    finally:
        loader.close()
    assert [(p.index, p.key, p.length) for p in first] == [(p.index, p.key, p.length) for p in inline]
    assert [p.length for p in second] == [len(t[2]) * 5 for t in tasks[:5]]
    import os

    assert {p.payload for p in first} - {os.getpid()}  # prepared in worker processes


def test_no_workers_prepare_on_the_caller_s_thread():
    import os

    prepared = list(InputLoader(Doubler(), 0).prepared([(0, "k", "abc", 0)]))
    assert prepared[0].payload == os.getpid() and prepared[0].length == 3


def test_workers_have_the_next_inputs_while_the_caller_holds_one_and_no_more():
    """As a DataLoader prefetches: when the caller gets an input, the next ``ahead`` are already submitted
    (the workers assemble while the model runs), and never more than that (memory stays bounded)."""
    taken = []

    def tasks():
        for i in range(20):
            taken.append(i)
            yield (i, f"k{i}", "x", 0)

    loader = InputLoader(Doubler(), 2, ahead=4, chunk=2)
    try:
        seen = [(prepared.index, len(taken)) for prepared in loader.prepared(tasks())]
    finally:
        loader.close()
    assert [index for index, _ in seen] == list(range(20))
    for index, submitted in seen:
        # the input's own submission of 2, then 4 more ahead of it (fewer at the end of the tasks)
        assert submitted == min(20, (index // 2 + 1) * 2 + 4), (index, submitted)


class Failing(Doubler):
    def prepare(self, index, key, item, yardstick):
        if item == "bad":
            raise ValueError("cannot identify image file\nsecond line")
        return super().prepare(index, key, item, yardstick)


def test_an_input_that_cannot_be_prepared_is_one_model_error_line():
    import pytest

    from harness.scoring.data import ModelError

    tasks = [(0, "k0", "good", 0), (1, "k1", "bad", 0)]
    for workers in (0, 1):
        loader = InputLoader(Failing(), workers)
        try:
            with pytest.raises(ModelError) as failure:
                list(loader.prepared(tasks))
        finally:
            loader.close()
        assert str(failure.value) == "ValueError: cannot identify image file"
