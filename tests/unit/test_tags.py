"""The elastic tag carried in a job's ``--comment``: ``adapter/tags.py``."""

from __future__ import annotations

import pytest

from elastic_slurm.adapter.tags import PREFIX, ElasticTag, decode
from elastic_slurm.model.request import JobKind


@pytest.mark.parametrize(
    ("tag", "text"),
    [
        (ElasticTag(JobKind.RIGID, 2, 2), "elastic-slurm:kind=rigid;min=2;max=2"),
        (ElasticTag(JobKind.MOLDABLE, 2, 4), "elastic-slurm:kind=moldable;min=2;max=4"),
        (ElasticTag(JobKind.MALLEABLE, 1, 4), "elastic-slurm:kind=malleable;min=1;max=4"),
        (ElasticTag(JobKind.EVOLVING, 3, 64), "elastic-slurm:kind=evolving;min=3;max=64"),
    ],
)
def test_encode_decode_round_trip(tag: ElasticTag, text: str) -> None:
    assert tag.encode() == text
    assert decode(text) == tag
    assert text.startswith(PREFIX)


@pytest.mark.parametrize(
    ("text", "tag"),
    [
        # field order does not matter
        ("elastic-slurm:max=4;min=2;kind=malleable", ElasticTag(JobKind.MALLEABLE, 2, 4)),
        # unknown fields and items without '=' are ignored (room for later fields)
        ("elastic-slurm:kind=moldable;min=1;max=2;step=1", ElasticTag(JobKind.MOLDABLE, 1, 2)),
        ("elastic-slurm:kind=moldable;;min=1;junk;max=2", ElasticTag(JobKind.MOLDABLE, 1, 2)),
        # trailing blanks, as scontrol prints the comment
        ("elastic-slurm:kind=malleable;min=1;max=4  ", ElasticTag(JobKind.MALLEABLE, 1, 4)),
        # the last duplicate wins
        (
            "elastic-slurm:kind=rigid;min=1;max=1;max=3;kind=moldable",
            ElasticTag(JobKind.MOLDABLE, 1, 3),
        ),
    ],
)
def test_decode_lenient_forms(text: str, tag: ElasticTag) -> None:
    assert decode(text) == tag


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "a user's own comment",
        "my comment: elastic-slurm:kind=malleable;min=2;max=4",  # not at the start
        "Elastic-Slurm:kind=malleable;min=2;max=4",
        "elastic-slurm:",
        "elastic-slurm:kind=malleable;min=2",  # no max
        "elastic-slurm:kind=malleable;max=4",  # no min
        "elastic-slurm:min=2;max=4",  # no kind
        "elastic-slurm:kind=flexible;min=2;max=4",  # unknown kind
        "elastic-slurm:kind=MALLEABLE;min=2;max=4",  # kinds are lower case
        "elastic-slurm:kind=malleable;min=4;max=2",  # min > max
        "elastic-slurm:kind=malleable;min=0;max=2",  # min < 1
        "elastic-slurm:kind=malleable;min=-1;max=2",
        "elastic-slurm:kind=malleable;min=two;max=4",
        "elastic-slurm:kind=malleable;min=1.5;max=4",
        "elastic-slurm:kind=malleable;min=;max=4",
        # a comment its user rewrote: numbers Python's int and float take, but not Slurm's
        "elastic-slurm:kind=malleable;min=1;max=1_0",
        "elastic-slurm:kind=malleable;min=+1;max=4",
        "elastic-slurm:kind=malleable;min=1;max=\u0663",  # an Arabic-Indic 3
        "elastic-slurm:kind=malleable;min=1;max=99999999999",
        "elastic-slurm:kind=malleable;min=1;max=" + "9" * 5000,
        "elastic-slurm:kind=malleable;min=1;max=4;grace=inf",
        "elastic-slurm:kind=malleable;min=1;max=4;grace=nan",
        "elastic-slurm:kind=malleable;min=1;max=4;grace=-5",
        "elastic-slurm:kind=malleable;min=1;max=4;grace=1e300",
    ],
)
def test_decode_rejects(text: str | None) -> None:
    assert decode(text) is None
