"""The decisions' written ``__init__`` behaves as the frozen dataclass's generated one would."""

from __future__ import annotations

import dataclasses
import inspect
import pickle

import pytest

from elastic_slurm.model.decisions import Expand, Shrink, Start


def _generated(cls: type) -> type:
    """The same dataclass with the generated ``__init__`` (the reference)."""
    names = [f.name for f in dataclasses.fields(cls)]
    return dataclasses.make_dataclass(
        f"Generated{cls.__name__}",
        [(names[0], int), (names[1], int), (names[2], str, dataclasses.field(default=""))],
        frozen=True,
    )


@pytest.mark.parametrize("cls", [Start, Expand, Shrink])
def test_the_written_init_is_the_generated_one(cls: type) -> None:
    ref = _generated(cls)
    first, second, _ = (f.name for f in dataclasses.fields(cls))
    params = [(p.name, p.kind, p.default) for p in inspect.signature(cls).parameters.values()]
    assert params == [
        (p.name, p.kind, p.default) for p in inspect.signature(ref).parameters.values()
    ]
    for args, kwargs in (
        ((7, 3), {}),
        ((7, 3, "why"), {}),
        ((7,), {second: 3}),
        ((), {first: 7, second: 3, "reason": "why"}),
    ):
        made, expected = cls(*args, **kwargs), ref(*args, **kwargs)
        assert dataclasses.astuple(made) == dataclasses.astuple(expected)
        assert vars(made) == vars(expected)
        assert repr(made) == repr(expected).replace("Generated", "")
        assert made == cls(*args, **kwargs) and hash(made) == hash(cls(*args, **kwargs))
        assert pickle.loads(pickle.dumps(made)) == made
    d = cls(7, 3, "why")
    assert d != cls(7, 4, "why") and d != cls(7, 3)
    assert dataclasses.replace(d, reason="other") == cls(7, 3, "other")
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.reason = "changed"  # type: ignore[misc]
    with pytest.raises(TypeError):
        cls(7)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        cls(7, 3, "why", "extra")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        cls(7, 3, colour="red")  # type: ignore[call-arg]


def test_kinds_stay_apart() -> None:
    assert Start(1, 2) != Expand(1, 2) and Expand(1, 2) != Shrink(1, 2)
    match Expand(4, 1):
        case Expand(job_id, count):
            assert (job_id, count) == (4, 1)
        case _:
            pytest.fail("no match")
