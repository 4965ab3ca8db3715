"""The loop every builder shares: seeded order, the cap, skips counted under their reason."""

from mmlongembed.core.builder import BuildReport, CommonConfig
from mmlongembed.core.documents import text_document
from mmlongembed.build.pool_plan import PoolContext, Skip, fill_pool
from mmlongembed.core.pools import EASY_NEGATIVE, POSITIVE, Candidate, LengthBand, Pool, Query
from mmlongembed.core.rng import derive_rng, seeded_order
from mmlongembed.core.tokens import default_counter


def _context(cap=3, seed=0):
    return PoolContext("toy", CommonConfig(seed=seed, max_queries_per_pool=cap), default_counter(),
                       BuildReport(progress=False))


def _made(item, counter):
    def candidate(cid, role):
        return Candidate(id=cid, document=text_document(cid, f"text of {cid}", counter), role=role,
                         group=f"q:{item}", source_id=item, n_tokens=4)
    query = Query(id=f"q:{item}", text=f"about {item}", instruction="find it", source_id=item, n_tokens=2)
    return query, candidate(f"d:{item}", POSITIVE), [candidate(f"n:{item}", EASY_NEGATIVE)]


def test_fill_pool_stops_at_the_cap_and_counts_skips_under_their_reason():
    context = _context(cap=2)
    pool = Pool(name="toy-easy-1k", task="logical_summarization", dataset="toy", difficulty="easy",
                band=LengthBand.halving(1024))

    def make(item):
        if item == "b":
            raise Skip("no_donor")
        if item == "c":
            return None  # passed over, not counted
        return _made(item, context.counter)

    added = fill_pool(pool, ["a", "b", "c", "d", "e"], make, context)
    assert added == 2 and [q.id for q in pool.queries] == ["q:a", "q:d"]
    assert len(pool.candidates) == 4 and pool.qrels == [("q:a", "d:a", 1), ("q:d", "d:d", 1)]
    assert dict(context.report.skipped) == {"no_donor": 1} and context.report.examples["no_donor"] == ["b"]


def test_context_generators_are_the_seeded_ones_and_orders_are_reproducible():
    context = _context(seed=7)
    assert context.rng("pool", "order").integers(1 << 30) == derive_rng(7, "toy", "pool", "order").integers(1 << 30)
    items = list("abcdefgh")
    assert seeded_order(items, context.rng("x")) == seeded_order(items, context.rng("x"))
    assert sorted(seeded_order(items, context.rng("x"))) == items
    assert seeded_order(items, context.rng("x")) != seeded_order(items, context.rng("y"))
