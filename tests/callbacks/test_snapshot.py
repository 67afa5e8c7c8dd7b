"""Tests of torchbend.callbacks.snapshot."""

import copy
import pickle

import pytest
import torch
from callback_helpers import ACT, CPU, WEIGHT, ConvNet, bits, signed_randn

import torchbend as tb
from torchbend.callbacks import Snapshot
from torchbend.callbacks.snapshot import tiled
from torchbend.controls import BendingParameter
from torchbend.errors import BendingError

SHAPE = torch.Size([2, 3, 8])


def registered(cb: Snapshot, *names: str, shape: torch.Size = SHAPE) -> Snapshot:
    for name in names or (ACT,):
        cb.register(name, shape, torch.float32, CPU)
    return cb


def test_a_taken_snapshot_is_crossfaded_into_later_calls():
    snap = registered(Snapshot(amount=0.25))
    seen, later = signed_randn(*SHAPE), signed_randn(*SHAPE) * 3.0 + 1.0
    with snap.take():
        assert snap(seen, ACT) is seen  # the call that saves passes through
    torch.testing.assert_close(snap(later, ACT), 0.75 * later + 0.25 * seen)
    snap.amount = 1.0
    assert torch.equal(bits(snap(later, ACT)), bits(seen))
    snap.amount = 0.0
    assert snap(later, ACT) is later


def test_the_saved_copy_is_detached_and_independent():
    snap = registered(Snapshot(amount=1.0))
    seen = signed_randn(*SHAPE).requires_grad_()
    with snap.take():
        snap(seen, ACT)
    expected = seen.detach().clone()
    with torch.no_grad():
        seen.add_(5.0)  # the activation changed after it was saved
    out = snap(torch.zeros(SHAPE), ACT)
    assert torch.equal(out, expected)
    assert not snap.saved[ACT].requires_grad
    out.add_(1.0)  # what bend returns is not the saved tensor itself
    assert torch.equal(snap.saved[ACT], expected)


def test_before_anything_is_saved_it_is_the_identity():
    snap = registered(Snapshot(amount=1.0))
    x = signed_randn(*SHAPE)
    assert snap(x, ACT) is x
    assert snap.bend_weight(x, ACT) is x


def test_the_snapshot_is_repeated_or_cropped_to_each_call_as_written_by_hand():
    snap = registered(Snapshot(amount=1.0), shape=torch.Size([1, 2, 3]))
    with snap.take():
        snap(torch.tensor([[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]), ACT)
    longer = snap(torch.zeros(2, 2, 7), ACT)
    row = [[1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 1.0], [4.0, 5.0, 6.0, 4.0, 5.0, 6.0, 4.0]]
    assert longer.tolist() == [row, row]  # time looped, batch repeated
    assert snap(torch.zeros(1, 2, 2), ACT).tolist() == [[[1.0, 2.0], [4.0, 5.0]]]
    assert snap(torch.zeros(1, 3, 1), ACT).tolist() == [[[1.0], [4.0], [1.0]]]


def test_tiled_crops_and_repeats_every_axis():
    source = torch.arange(6.0).reshape(2, 3)
    assert tiled(source, [3, 2]).tolist() == [[0.0, 1.0], [3.0, 4.0], [0.0, 1.0]]
    assert tiled(source, [2, 3]) is source


def test_saved_tensors_given_by_target_or_node_name():
    t = signed_randn(*SHAPE)
    x = signed_randn(*SHAPE) + 2.0
    by_target = registered(Snapshot(1.0, saved={ACT: t}))
    by_node = registered(Snapshot(1.0, saved={"conv": t}))
    assert torch.equal(by_target(x, ACT), t)
    assert torch.equal(by_node(x, ACT), t)
    assert by_target(x, "forward:other") is x
    t.zero_()  # the given tensor is copied
    assert not torch.equal(by_target(x, ACT), t)


def test_take_stays_armed_until_each_target_is_saved():
    snap = registered(Snapshot(amount=1.0), ACT, "forward:other")
    a, b, c = signed_randn(*SHAPE), signed_randn(*SHAPE) + 1.0, signed_randn(*SHAPE) + 2.0
    snap.take()
    snap(a, ACT)
    assert snap.taking
    assert torch.equal(snap(c, ACT), a)  # saved once per take
    snap(b, "forward:other")
    assert not snap.taking
    assert torch.equal(snap(c, "forward:other"), b)
    snap.take()  # again: what is saved is replaced
    snap(c, ACT)
    assert torch.equal(snap(a, ACT), c)


def test_a_with_block_disarms_on_exit():
    snap = registered(Snapshot(amount=1.0), ACT, "forward:other")
    with snap.take():
        snap(signed_randn(*SHAPE), ACT)
        assert snap.taking
    assert not snap.taking
    x = signed_randn(*SHAPE)
    assert snap(x, "forward:other") is x


def test_clear_forgets_one_target_or_all():
    snap = registered(Snapshot(amount=1.0), ACT, "forward:other")
    with snap.take():
        snap(signed_randn(*SHAPE), ACT)
        snap(signed_randn(*SHAPE), "forward:other")
    snap.clear(ACT)
    assert set(snap.saved) == {"forward:other"}
    x = signed_randn(*SHAPE)
    assert snap(x, ACT) is x
    snap.clear()
    assert snap.saved == {} and snap(x, "forward:other") is x


def test_the_snapshot_outlives_a_bending_taken_back():
    snap = registered(Snapshot(amount=1.0))
    t = signed_randn(*SHAPE)
    with snap.take():
        snap(t, ACT)
    snap.unregister(ACT)
    registered(snap)
    assert torch.equal(snap(torch.zeros(SHAPE), ACT), t)


def test_a_ramping_amount_spreads_along_time():
    amount = BendingParameter("amount", 0.0, ramp=1)
    snap = registered(Snapshot(amount, saved={ACT: torch.ones(SHAPE)}))
    amount.set(1.0)
    out = snap(torch.zeros(SHAPE), ACT)
    torch.testing.assert_close(out, torch.linspace(0.0, 1.0, 9)[1:].expand(SHAPE))
    # A weight is bent once, at the control's value.
    assert torch.equal(snap.bend_weight(torch.zeros(SHAPE), ACT), torch.ones(SHAPE))


def test_amount_1_gives_the_snapshot_whatever_the_input():
    t = signed_randn(*SHAPE)
    snap = registered(Snapshot(1.0, saved={ACT: t}))
    x = torch.full(SHAPE, float("nan"))
    x[0, 0, 0] = float("inf")
    assert torch.equal(bits(snap(x, ACT)), bits(t))


def test_weights_are_saved_and_crossfaded_too():
    snap = Snapshot(amount=0.5)
    snap.register(WEIGHT, torch.Size([4, 3]), torch.float32, CPU)
    w, other = signed_randn(4, 3), signed_randn(4, 3) + 1.0
    with snap.take():
        assert snap.bend_weight(w, WEIGHT) is w
    torch.testing.assert_close(snap.bend_weight(other, WEIGHT), (w + other) / 2)


def test_copies_and_pickles_carry_the_snapshot():
    snap = registered(Snapshot(amount=0.5))
    with snap.take():
        snap(signed_randn(*SHAPE), ACT)
    x = signed_randn(*SHAPE) + 1.0
    for again in (copy.deepcopy(snap), pickle.loads(pickle.dumps(snap))):
        assert torch.equal(again(x, ACT), snap(x, ACT))
    assert any(torch.equal(t, snap.saved[ACT]) for t in snap.state_dict().values())


def test_a_taken_snapshot_scripts_as_buffers():
    snap = registered(Snapshot(amount=0.75))
    with snap.take():
        snap(signed_randn(*SHAPE), ACT)
    scripted = torch.jit.script(snap)
    x = signed_randn(*SHAPE) + 1.0
    assert torch.equal(bits(scripted(x, ACT)), bits(snap(x, ACT)))
    assert torch.equal(bits(scripted(x, "forward:other")), bits(x))


def test_the_repr_shows_the_shapes_saved():
    amount = BendingParameter("depth", 0.0)
    snap = Snapshot(amount, saved={ACT: torch.zeros(1, 2, 3)})
    assert repr(snap) == "Snapshot(amount=depth, saved={'forward:conv': [1, 2, 3]})"
    assert repr(Snapshot()) == "Snapshot()"


def test_bad_arguments_and_shapes_are_refused():
    with pytest.raises(BendingError, match=r"Snapshot: amount .* between 0 and 1, got 1.5"):
        Snapshot(1.5)
    with pytest.raises(BendingError, match=r"Snapshot: saved must be a dict of tensors"):
        Snapshot(saved=[torch.zeros(2)])
    with pytest.raises(BendingError, match=r"got list for 'conv'"):
        Snapshot(saved={"conv": [1.0, 2.0]})
    snap = Snapshot(1.0, saved={ACT: torch.zeros(2, 3)})
    with pytest.raises(BendingError, match=r"the tensor saved for it has shape \[2, 3\]"):
        snap.register(ACT, SHAPE, torch.float32, CPU)
    with pytest.raises(BendingError, match=r"cannot be fitted to a call of shape \[2, 3, 8\]"):
        snap(signed_randn(*SHAPE), ACT)
    empty = Snapshot(1.0, saved={ACT: torch.zeros(2, 0)})
    with pytest.raises(BendingError, match=r"empty tensor of shape \[2, 0\]"):
        empty(torch.ones(2, 3), ACT)


def test_a_bended_model_freezes_on_a_snapshot_and_exports_it():
    torch.manual_seed(0)
    net = ConvNet()
    bended = tb.BendedModule(net)
    a, b = torch.randn(1, 1, 16), torch.randn(1, 1, 16)
    bended.trace(x=a)
    amount = BendingParameter("freeze", 0.0)
    snap = Snapshot(amount)
    bended.bend(snap, "tanh$")
    with torch.no_grad(), snap.take():
        assert torch.equal(bended(a), net(a))
    amount.set(1.0)
    with torch.no_grad():
        assert torch.equal(bended(b), net.out(torch.tanh(net.conv(a))))
        scripted = tb.export.torchscript(bended)
        assert torch.equal(scripted(b), bended(b))
        assert scripted.set_freeze(0.0) == 0
        assert torch.equal(scripted(b), net(b))
