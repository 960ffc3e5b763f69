"""The controller-to-job wire format: ``model/resize_order.py``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from elastic_slurm.model.resize_order import (
    AckStatus,
    ResizeAck,
    ResizeAction,
    ResizeOrder,
)

ORDER = ResizeOrder(3, ResizeAction.SHRINK, ("n1", "n2"), 1795312900.25)
ACK = ResizeAck(
    3,
    AckStatus.DONE,
    ("n1", "n2"),
    1795312901.5,
    strategy="restart",
    reason="shrink: ...",
    ranks=4,
    phases_s={"checkpoint": 0.5, "relaunch": 1.25},
)


def test_order_to_json() -> None:
    assert ORDER.to_json() == {
        "seq": 3,
        "action": "shrink",
        "nodes": ["n1", "n2"],
        "issued_at": 1795312900.25,
        "phases_s": {},
    }


def test_order_carries_the_controllers_phase_times() -> None:
    order = ResizeOrder(4, ResizeAction.EXPAND, ("n1",), 1.0, phases_s={"grant": 0.5})
    assert ResizeOrder.from_json(order.to_json()) == order
    assert ResizeOrder.from_json({**order.to_json(), "phases_s": None}).phases_s == {}


def test_ack_to_json() -> None:
    assert ACK.to_json() == {
        "seq": 3,
        "status": "done",
        "nodes": ["n1", "n2"],
        "at": 1795312901.5,
        "strategy": "restart",
        "reason": "shrink: ...",
        "ranks": 4,
        "phases_s": {"checkpoint": 0.5, "relaunch": 1.25},
    }


@pytest.mark.parametrize(
    "order",
    [
        ORDER,
        ResizeOrder(1, ResizeAction.EXPAND, ("n1", "n2", "n3"), 0.0),
        ResizeOrder(999999, ResizeAction.EXPAND, ("a b", "n'1"), 1.0),
    ],
)
def test_order_round_trip_through_json_text(order: ResizeOrder) -> None:
    assert ResizeOrder.from_json(json.loads(json.dumps(order.to_json()))) == order


@pytest.mark.parametrize(
    "ack",
    [
        ACK,
        ResizeAck(1, AckStatus.VACATED, ("n3",), 2.0),
        ResizeAck(2, AckStatus.FAILED, ("n1",), 3.0, reason="steps still run on n2"),
    ],
)
def test_ack_round_trip_through_json_text(ack: ResizeAck) -> None:
    assert ResizeAck.from_json(json.loads(json.dumps(ack.to_json()))) == ack


def test_from_json_converts_types() -> None:
    order = ResizeOrder.from_json(
        {"seq": "2", "action": "expand", "nodes": [1, "n2"], "issued_at": 5}
    )
    assert order == ResizeOrder(2, ResizeAction.EXPAND, ("1", "n2"), 5.0)
    ack = ResizeAck.from_json(
        {"seq": 1, "status": "vacated", "nodes": [], "at": "7", "phases_s": {"spawn": "2"}}
    )
    assert ack == ResizeAck(1, AckStatus.VACATED, (), 7.0, phases_s={"spawn": 2.0})


def test_ack_optional_fields_default() -> None:
    ack = ResizeAck.from_json({"seq": 4, "status": "failed", "nodes": ["n1"], "at": 1})
    assert (ack.strategy, ack.reason, ack.ranks, ack.phases_s) == ("", "", 0, {})


def _without(data: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != key}


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (_without(ORDER.to_json(), "seq"), KeyError),
        (_without(ORDER.to_json(), "action"), KeyError),
        (_without(ORDER.to_json(), "nodes"), KeyError),
        (_without(ORDER.to_json(), "issued_at"), KeyError),
        ({**ORDER.to_json(), "action": "grow"}, ValueError),
        ({**ORDER.to_json(), "action": "EXPAND"}, ValueError),
        ({**ORDER.to_json(), "seq": "three"}, ValueError),
        ({**ORDER.to_json(), "issued_at": "soon"}, ValueError),
    ],
)
def test_order_from_malformed_json(data: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        ResizeOrder.from_json(data)


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (_without(ACK.to_json(), "seq"), KeyError),
        (_without(ACK.to_json(), "status"), KeyError),
        (_without(ACK.to_json(), "nodes"), KeyError),
        (_without(ACK.to_json(), "at"), KeyError),
        ({**ACK.to_json(), "status": "ok"}, ValueError),
        ({**ACK.to_json(), "ranks": "many"}, ValueError),
        ({**ACK.to_json(), "phases_s": {"spawn": "slow"}}, ValueError),
    ],
)
def test_ack_from_malformed_json(data: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        ResizeAck.from_json(data)


def test_order_nodes_must_be_a_list() -> None:
    with pytest.raises(ValueError):
        ResizeOrder.from_json({**ORDER.to_json(), "nodes": "n1,n2"})
