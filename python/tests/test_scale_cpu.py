"""The scale family's Python side without a GPU: its module on CPU tensors, its custom op (opcheck: schema,
fake tensor, AOT dispatch), the C ABI's refusals through ctypes. The family adds its own modules and one
entry in lkjit.torch's family list, nothing else."""
import pytest

torch = pytest.importorskip("torch")

import lkjit  # noqa: E402
from lkjit._scale_abi import ScaleLayer  # noqa: E402


def test_the_module_scales_each_channel_on_cpu():
    import lkjit.torch as lt
    m = lt.ScaledCopy(3)
    m.scale.copy_(torch.tensor([0.5, -2.0, 3.0]))
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(2, 3, 4, 5).to(dtype)
        y = m(x)
        assert y.dtype == dtype and y.shape == x.shape
        want = (x.float() * m.scale.view(1, -1, 1, 1)).to(dtype)
        assert torch.equal(y, want)
    assert "scale" in m.state_dict()


def test_opcheck_and_fake_shapes():
    import lkjit.torch as lt
    x, a = torch.randn(2, 3, 4, 5), torch.randn(3)
    torch.library.opcheck(torch.ops.lkjit.scale_copy.default, (x, a))
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        y = lt.scale_copy(torch.empty(64, 96, 56, 56, dtype=torch.bfloat16), torch.empty(96))
    assert y.shape == (64, 96, 56, 56) and y.dtype == torch.bfloat16


def test_bad_arguments_are_refused_by_the_library():
    with pytest.raises(lkjit.SpecError, match=r"C=0 is out of range; supported: \[1, 2\^24\]"):
        ScaleLayer(0)
    with pytest.raises(ValueError, match="must be"):
        import lkjit.torch as lt
        lt.scale_copy(torch.randn(2, 3), torch.randn(3))


def test_values_beyond_the_c_types_are_refused_before_ctypes():
    """C (int64_t) and device (int) that the C ABI's types cannot hold are refused naming the value, instead of
    reaching the library wrapped (2^31 as device -2^31)."""
    with pytest.raises(lkjit.SpecError, match=r"device=2147483648 is out of range; supported: \[0, 2\^31-1\]"):
        ScaleLayer(8, "f32", 2 ** 31)
    with pytest.raises(lkjit.SpecError, match=r"C=9223372036854775808 is out of range; supported: \[1, 2\^24\]"):
        ScaleLayer(2 ** 63)
