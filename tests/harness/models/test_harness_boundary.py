"""The generative boundary readout (harness.models.boundary) on CPU without downloaded weights: a tiny random
Qwen3 causal LM built from a config, with the boundary tokens added to the real Qwen3 tokenizer, and
logits processors that force a known output or suppress the boundary tokens."""

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from harness.cli import main
from harness.scoring.data import Item
from harness.models.adapters import RunSettings, load_model
from harness.fixtures import make_pool, png, write_benchmark
from tests.support.fixtures_harness import qwen3_tokenizer, save_tiny_qwen2_vl

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

TOKENS = ("<ENT>", "<ATT>", "<REL>", "<DET>", "<SUM>")
EVIDENCE = "[Entity] a grey cat<ENT>[Attribute] indoors<ATT>[Relation] on a mat<REL>[Detail] stripes<DET>" \
           "[Summary] a cat on a mat<SUM>"


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory) -> Path:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    directory = tmp_path_factory.mktemp("tiny-qwen3-lm")
    tokenizer = qwen3_tokenizer(TOKENS)
    config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=4096,
                         tie_word_embeddings=True, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    Qwen3ForCausalLM(config).eval().save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


class Force:
    """Forces ``sequence`` token by token from the first generated position, then end-of-sequence."""

    def __init__(self, sequence: list[int], eos: int):
        self.sequence, self.eos = list(sequence), eos
        self.cache_key = f"force:{sequence}"
        self._start = self._last = None

    def __call__(self, input_ids, scores):
        length = input_ids.shape[1]
        if self._last is None or length != self._last + 1:  # a new generation
            self._start = length
        self._last = length
        step = length - self._start
        target = self.sequence[step] if step < len(self.sequence) else self.eos
        forced = torch.full_like(scores, float("-inf"))
        forced[:, target] = 0.0
        return forced


def _model(path, max_new_tokens=48, **settings):
    return load_model(f"hfgen:{path}", RunSettings(max_new_tokens=max_new_tokens, **settings))


def _hidden(model, ids):
    with torch.no_grad():
        return model.model(torch.tensor([ids]), output_hidden_states=True).hidden_states[-1][0].numpy()


def _unit(v):
    return v / np.linalg.norm(v)


def test_forced_evidence_is_read_at_its_boundary_tokens(tiny_lm):
    model = _model(tiny_lm)
    tok = model.tokenizer
    evidence = tok.encode(EVIDENCE, add_special_tokens=False)
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    model.logits_processors = [Force(evidence, eos)]
    item = Item("c1", "A grey cat sleeps on a striped mat in the kitchen.")
    vectors, flags = model.embed([item])
    # by hand: prompt + forced evidence + end-of-sequence, states at the five known positions
    prompt = tok.encode(item.text, add_special_tokens=False)
    hidden = _hidden(model, prompt + evidence + [eos])
    ids = [tok.convert_tokens_to_ids(t) for t in TOKENS]
    positions = [len(prompt) + evidence.index(i) for i in ids]
    assert positions == sorted(positions) and len(set(positions)) == 5
    expected = _unit(hidden[positions].mean(axis=0))
    assert np.allclose(vectors[0], expected, atol=1e-5)
    assert abs(np.linalg.norm(vectors[0]) - 1) < 1e-6 and flags == [False]
    # not the last token, not a neighbour of the boundary tokens
    assert not np.allclose(vectors[0], _unit(hidden[[p - 1 for p in positions]].mean(axis=0)), atol=1e-3)
    generation = model._generation(item)
    assert generation.text == EVIDENCE + "<|im_end|>" and generation.valid_format
    assert generation.n_generated == len(evidence) and all(v is not None for v in generation.positions.values())


def test_a_missing_token_falls_back_to_the_last_generated_token(tiny_lm):
    model = _model(tiny_lm)
    tok = model.tokenizer
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    without_sum = tok.encode(EVIDENCE.replace("<SUM>", ""), add_special_tokens=False)
    model.logits_processors = [Force(without_sum, eos)]
    item = Item("c2", "Another input.")
    vector = model.embed([item])[0][0]
    prompt = tok.encode(item.text, add_special_tokens=False)
    full = prompt + without_sum + [eos]
    hidden = _hidden(model, full)
    ids = [tok.convert_tokens_to_ids(t) for t in TOKENS[:4]]
    rows = [len(prompt) + without_sum.index(i) for i in ids] + [len(full) - 1]  # <SUM> read at the last token
    assert np.allclose(vector, _unit(hidden[rows].mean(axis=0)), atol=1e-5)
    generation = model._generation(item)
    assert generation.positions["<SUM>"] is None and not generation.valid_format


def test_suppressed_tokens_all_fall_back(tiny_lm):
    from transformers import SuppressTokensLogitsProcessor

    model = _model(tiny_lm, max_new_tokens=12)
    ids = [model.tokenizer.convert_tokens_to_ids(t) for t in TOKENS]
    suppress = SuppressTokensLogitsProcessor(ids)
    suppress.cache_key = "suppress-boundary"
    model.logits_processors = [suppress]
    item = Item("c3", "Free generation from a random model.")
    vector = model.embed([item])[0][0]
    generation = model._generation(item)
    assert all(p is None for p in generation.positions.values()) and not generation.valid_format
    assert not set(generation.generated) & set(ids)
    prompt = model.tokenizer.encode(item.text, add_special_tokens=False)
    hidden = _hidden(model, prompt + generation.generated)
    assert np.allclose(vector, _unit(hidden[-1]), atol=1e-5)  # the mean of five fallbacks is the last state
    assert abs(np.linalg.norm(vector) - 1) < 1e-6


@pytest.mark.parametrize("options, read", [
    ({"pooling": "trailing"}, ["<SUM>"]),
    ({"readout_subset": ("<DET>",)}, ["<DET>"]),  # one-slot
    ({"readout_drop": ("<ENT>",)}, ["<ATT>", "<REL>", "<DET>", "<SUM>"]),  # leave-one-out
])
def test_readout_options(tiny_lm, options, read):
    model = _model(tiny_lm, **options)
    tok = model.tokenizer
    evidence = tok.encode(EVIDENCE, add_special_tokens=False)
    model.logits_processors = [Force(evidence, tok.convert_tokens_to_ids("<|im_end|>"))]
    item = Item("c4", "The same kind of input.")
    vector = model.embed([item])[0][0]
    prompt = tok.encode(item.text, add_special_tokens=False)
    hidden = _hidden(model, prompt + evidence + [tok.convert_tokens_to_ids("<|im_end|>")])
    rows = [len(prompt) + evidence.index(tok.convert_tokens_to_ids(t)) for t in read]
    assert np.allclose(vector, _unit(hidden[rows].mean(axis=0)), atol=1e-5)
    assert model.identity()["readout"] == read


def test_bad_readout_options_are_one_line(tiny_lm):
    from mmlongembed.core.errors import UserError

    with pytest.raises(UserError, match="not one token"):
        _model(tiny_lm, readout_tokens=("<ENT>", "<NOPE>"))
    with pytest.raises(UserError, match="not readout tokens"):
        _model(tiny_lm, readout_subset=("<CTX>",))
    with pytest.raises(UserError, match="leave no readout token"):
        _model(tiny_lm, readout_drop=TOKENS)
    with pytest.raises(UserError, match="reads out at"):
        _model(tiny_lm, pooling="mean")


def test_scores_a_built_pool_and_reports_the_readout(tiny_lm, tmp_path):
    bench = write_benchmark(tmp_path / "bench", [make_pool("govreport-easy-256", words=40, n_queries=2)])
    cache = tmp_path / "cache"

    def score(output, *extra, new_tokens="6"):
        return main(["--dataset", str(bench), "--model", f"hf:{tiny_lm}", "--pooling", "boundary", "--max-length",
                     "256", "--cache-dir", str(cache), "--quiet", "--bootstrap", "20", "--no-plots",
                     "--max-new-tokens", new_tokens, "--output", str(tmp_path / output), *extra])

    assert score("r1") == 0
    report = json.loads((tmp_path / "r1" / "results.json").read_text())
    row = report["results"][0]
    readout = row["readout"]
    n = row["n_queries"] + row["n_candidates"]
    assert readout["inputs"] == n and 0 <= readout["format_valid"] <= n
    assert set(readout["fallbacks"]) == set(TOKENS) and all(0 <= v <= n for v in readout["fallbacks"].values())
    assert 0 < readout["mean_generated_tokens"] <= 6
    assert report["models"][0]["identity"]["max_new_tokens"] == 6
    assert "Generative readout" in (tmp_path / "r1" / "table.md").read_text()
    # the generated evidence is kept beside the vectors, one record per input
    database = Path(readout["evidence_store"]["sqlite"])
    with sqlite3.connect(database) as connection:
        records = connection.execute("SELECT record FROM boundary_generations").fetchall()
    assert len(records) == n and all("text" in json.loads(r[0]) for r in records)
    # another readout of the same generations: nothing is generated again, but it is a new vector
    assert score("r2", "--readout-subset", "<SUM>") == 0
    second = json.loads((tmp_path / "r2" / "results.json").read_text())["results"][0]
    assert second["embedded"] == n and second["readout"]["fallbacks"] == readout["fallbacks"]
    with sqlite3.connect(database) as connection:
        assert connection.execute("SELECT COUNT(*) FROM boundary_generations").fetchone()[0] == n
    # other generation settings are other generations
    assert score("r3", new_tokens="4") == 0
    with sqlite3.connect(database) as connection:
        assert connection.execute("SELECT COUNT(*) FROM boundary_generations").fetchone()[0] == 2 * n


@pytest.mark.parametrize("units, tokens", [(1, ["<ENT>"]), (3, ["<ENT>", "<ATT>", "<REL>"])])
def test_readout_units_read_the_papers_sets_and_trailing_reads_their_last_token(tiny_lm, tmp_path, units, tokens):
    """EviAlign §4.4's K = 1 (Entity) and K = 3 (Entity/Attribute/Relation) sets have no <SUM>: Trailing
    reads the set's last token, the one that closes the whole evidence."""
    bench = write_benchmark(tmp_path / "bench", [make_pool("govreport-easy-256", words=20, n_queries=1)])
    assert main(["--dataset", str(bench), "--model", f"hf:{tiny_lm}", "--pooling", "trailing", "--max-length", "256",
                 "--no-cache", "--quiet", "--bootstrap", "10", "--no-plots", "--max-new-tokens", "3",
                 "--readout-units", str(units), "--output", str(tmp_path / "r")]) == 0
    report = json.loads((tmp_path / "r" / "results.json").read_text())
    identity = report["models"][0]["identity"]
    assert identity["readout_tokens"] == tokens and identity["readout"] == tokens[-1:]
    assert set(report["results"][0]["readout"]["fallbacks"]) == set(tokens)
    assert main(["--dataset", str(bench), "--model", f"hf:{tiny_lm}", "--readout-units", "3",
                 "--readout-tokens", "<ENT>", "--no-cache", "--quiet", "--no-plots"]) == 2


def test_a_vision_language_model_sees_the_images(tmp_path):
    from transformers import Qwen2VLForConditionalGeneration

    tokenizer = qwen3_tokenizer(TOKENS)
    ids = tokenizer.convert_tokens_to_ids
    save_tiny_qwen2_vl(tmp_path / "vl", tokenizer, Qwen2VLForConditionalGeneration)
    model = _model(tmp_path / "vl", max_new_tokens=3)
    assert model.modalities == {"text", "image"}
    text = "alpha <|image|> beta"
    vectors, _ = model.embed([Item("a", text, (png((220, 20, 20)),)), Item("b", text, (png((20, 20, 220)),))])
    assert not np.allclose(vectors[0], vectors[1])  # the image reached the model
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-6)
    prompt, images, _ = model._prompt(Item("a", text, (png((220, 20, 20)),)))
    assert len(images) == 1 and prompt.count(ids("<|image_pad|>")) == model._image_cost(images[0])
