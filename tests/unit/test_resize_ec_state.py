"""``ec.state`` refuses what cannot survive a resize where it is set, naming the key."""

from __future__ import annotations

import numpy as np
import pytest

from elastic_slurm.mpi_runtime.state import ResizeState


def test_scalars_are_kept_and_numpy_scalars_become_python_ones() -> None:
    state = ResizeState(iteration=0)
    state["dt"] = np.float64(0.5)
    state.setdefault("name", "heat")
    state.update(done=False, note=None)
    state |= {"step": np.int32(3)}
    assert state == {
        "iteration": 0,
        "dt": 0.5,
        "name": "heat",
        "done": False,
        "note": None,
        "step": 3,
    }
    assert type(state["dt"]) is float and type(state["step"]) is int


@pytest.mark.parametrize(
    "setter",
    [
        lambda s: s.__setitem__("history", [1, 2]),
        lambda s: s.update(history=[1, 2]),
        lambda s: s.setdefault("history", [1, 2]),
        lambda s: s.__ior__({"history": [1, 2]}),
        lambda s: ResizeState({"history": [1, 2]}),
    ],
)
def test_a_list_is_refused_where_it_is_set(setter) -> None:
    state = ResizeState(iteration=1)
    with pytest.raises(ValueError, match=r"state\['history'\] is a list") as err:
        setter(state)
    assert state == {"iteration": 1}  # nothing half-set
    # it says what an elastic program uses instead (not the checkpoint module's save_rows)
    assert "ec.array" in str(err.value) and "ec.on_resize" in str(err.value)


def test_a_key_that_is_not_a_string_is_refused() -> None:
    with pytest.raises(ValueError, match="keys must be str"):
        ResizeState()[3] = 1
