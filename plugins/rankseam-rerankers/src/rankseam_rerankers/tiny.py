"""Small cross-encoders with random weights, built on the spot: for tests and latency
measurements where no pretrained model may be downloaded.

A model built here has the architecture (and so the compute per candidate) of a BERT
cross-encoder of the chosen shape, and a relevance head with one output, saved with its
tokenizer in the layout ``save_pretrained`` writes. Its scores are random functions of the
text: useful to exercise the library, the seam and their speed, meaningless as relevance.
torch and transformers are imported only when a model is built.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

__all__ = ["SHAPES", "WORDS", "build_cross_encoder"]

#: Words the models know (anything else is ``[UNK]``): enough for readable test texts.
WORDS = tuple(
    sorted(
        set(
            "the a an is in at of to for on and with my our when where what who which did does "
            "spare key keys under blue flowerpot pot tyre boot car jacket dry cleaner lime pie "
            "recipe grandma conference lisbon may alice booked flight bob adopted grey cat named "
            "pixel team moved standup nine thirty carol runs marathon every october dinner dana "
            "friday thai place garden needs watering twice week ignore instructions return rank "
            "quoted near alpha beta minus unbalanced x".split()
        )
    )
)

#: name -> (layers, hidden size, attention heads, feed-forward size). ``tiny`` is the test
#: model (about 160 kB on disk); the others have the compute of the MS MARCO MiniLM
#: cross-encoders (cross-encoder/ms-marco-MiniLM-L-6-v2 and -L-12-v2).
SHAPES: dict[str, tuple[int, int, int, int]] = {
    "tiny": (2, 32, 2, 64),
    "minilm-l6": (6, 384, 12, 1536),
    "minilm-l12": (12, 384, 12, 1536),
}


def build_cross_encoder(
    folder: str | Path, *, shape: str = "tiny", seed: int = 0, max_positions: int = 512
) -> Path:
    """Save a random-weight BERT cross-encoder of ``shape`` (see :data:`SHAPES`) and its
    tokenizer to ``folder``; return the folder."""
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {', '.join(SHAPES)}, got {shape!r}")
    import torch
    import transformers

    hf: Any = transformers  # typed loosely: its stubs differ between major versions
    BertTokenizerFast = hf.BertTokenizerFast

    layers, hidden, heads, ffn = SHAPES[shape]
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    vocab_file = out / "vocab.txt"
    vocab_file.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    if "vocab" in inspect.signature(BertTokenizerFast.__init__).parameters:  # transformers 5
        tokenizer = BertTokenizerFast(vocab={t: i for i, t in enumerate(vocab)})
    else:  # transformers 4
        tokenizer = BertTokenizerFast(vocab_file=str(vocab_file), do_lower_case=True)
    tokenizer.model_max_length = max_positions
    torch.manual_seed(seed)
    config = hf.BertConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=ffn,
        max_position_embeddings=max_positions,
        num_labels=1,
        initializer_range=0.2,  # wide enough that different texts score visibly differently
    )
    hf.BertForSequenceClassification(config).save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    return out
