"""Policy specs: several columns of one reranker with different options."""

from __future__ import annotations

import pytest

from rankseam.bench.policies import option_defaults, parse_policies, parse_policy
from rankseam.errors import ConfigurationError


def test_specs_with_options_become_separate_columns():
    specs = parse_policies("none,identity,mmr:lambda=0.5,mmr:lambda=0.7", ["mmr:relevance=coarse"])
    assert [s.label for s in specs] == [
        "none",
        "identity",
        "mmr:lambda=0.5",
        "mmr:lambda=0.7",
        "mmr:relevance=coarse",
    ]
    assert specs[0].reranker is None
    assert dict(specs[2].options) == {"lambda": 0.5}
    assert specs[4].options["relevance"] == "coarse"


def test_values_are_toml_literals_and_hyphens_become_underscores():
    spec = parse_policy("x:max-chars=10:flag=true")
    assert dict(spec.options) == {"max_chars": 10, "flag": True}
    assert parse_policy("x:s=word").options["s"] == "word"


def test_option_defaults_apply_and_spec_options_win():
    defaults = option_defaults(["mmr.lambda=0.7", "mmr.relevance=coarse"])
    specs = parse_policies("none,mmr,mmr:lambda=0.2", defaults=defaults)
    assert [s.label for s in specs] == [
        "none",
        "mmr:lambda=0.7:relevance=coarse",
        "mmr:lambda=0.2:relevance=coarse",
    ]


def test_duplicates_removed_and_errors_say_how_to_fix():
    assert len(parse_policies("identity,identity")) == 1
    with pytest.raises(ConfigurationError, match="KEY=VALUE"):
        parse_policy("mmr:lambda")
    with pytest.raises(ConfigurationError, match="takes no options"):
        parse_policy("none:a=1")
    with pytest.raises(ConfigurationError, match="no policy"):
        parse_policies(",")
    with pytest.raises(ConfigurationError, match="NAME.KEY=VALUE"):
        option_defaults(["lambda=0.7"])


def test_the_reranker_named_rerankers_takes_options_like_any_other():
    # "rerankers" is both a configuration table and the name of rankseam-rerankers' reranker:
    # two parts mean NAME.KEY, three mean TABLE.NAME.KEY.
    defaults = option_defaults(
        ["rerankers.model=/models/ce", "rerankers.rerankers.model_type=cross-encoder"]
    )
    assert defaults == {"rerankers": {"model": "/models/ce", "model_type": "cross-encoder"}}
    specs = parse_policies("none,rerankers:model=/models/ms-marco:batch-size=8")
    assert specs[1].reranker == "rerankers"
    assert dict(specs[1].options) == {"model": "/models/ms-marco", "batch_size": 8}
    assert specs[1].label == "rerankers:batch_size=8:model=/models/ms-marco"
