"""``nbx.Generator``: a seed and a Philox counter offset, the same on every device.

A generator is two 64-bit numbers: the **seed** (the Philox key, :mod:`.philox`) and the **offset** (the next
unused 64-bit block counter). Each draw reserves the ``nblocks`` counters it needs, ``[offset, offset +
nblocks)``, and advances the offset past them under a lock, so no counter is ever used by two draws of one
generator. The numbers a draw produces depend only on (seed, offset, the draw's size, dtype and
parameters), never on the device: a ``cpu`` and a ``cuda`` generator with the same seed and offset give the
same bits (PyTorch's CPU generator is a Mersenne twister and its CUDA one a differently laid-out Philox, so it
does not offer this).

Differences from PyTorch, stated plainly:

- ``get_state()`` is 16 bytes (seed, offset; little-endian uint64) on every device, as PyTorch's CUDA state;
  PyTorch's CPU state is a 5056-byte Mersenne-twister state.
- ``get_offset()``/``set_offset()`` work on CPU generators too (PyTorch: "CPU Generator does not use offset").
  The offset counts 128-bit Philox blocks (four 32-bit words), not words.
- The default generators of all devices start from one seed drawn from ``os.urandom`` when nbxtensor is
  imported (PyTorch seeds its default CPU generator non-deterministically too); ``nbx.manual_seed`` seeds
  them all, including CUDA generators created later.
"""

from __future__ import annotations

import operator
import os
import threading

import numpy as np

from .._errors import check, fail
from ..device.base import as_device
from ..device.base import device as Device

__all__ = ["Generator", "default_generator", "default_generator_for", "manual_seed", "seed", "initial_seed",
           "get_rng_state", "set_rng_state", "resolve_generator", "DEFAULT_SEED"]

DEFAULT_SEED = 67280421310721  # a new torch.Generator()'s initial seed (c10 default_rng_seed_val)
_U64 = 1 << 64
STATE_BYTES = 16


def _seed_value(seed, fn: str) -> int:
    """PyTorch's seed rule: an integer in [-2**63, 2**64); negative seeds wrap to their 64-bit pattern."""
    check(not isinstance(seed, (float, complex)) and hasattr(seed, "__index__"),
          lambda: f"{fn} expected a long, but got {type(seed).__name__}")
    s = operator.index(seed)
    check(-(1 << 63) <= s < _U64, lambda: f"{fn}: seed {s} is outside [-2**63, 2**64) (Overflow when unpacking "
          "long long)", ValueError)
    return s % _U64


def _random_seed() -> int:
    return int.from_bytes(os.urandom(8), "little")


class Generator:
    """A Philox4x32-10 stream: a 64-bit seed and a 64-bit block offset (``torch.Generator``).

    Args:
        device: the device whose tensors this generator fills (``"cpu"`` default, ``"cuda"``, ``"cuda:1"``).
            Draws check that the output is on this device, as PyTorch does.

    A new generator has seed 67280421310721 (PyTorch's) and offset 0. See the module docstring for the
    stream layout and the differences from PyTorch.

    Example:
        >>> import nbxtensor as nbx
        >>> g = nbx.Generator().manual_seed(42)
        >>> a = nbx.rand(3, generator=g)
        >>> g.get_offset()
        1
    """

    def __init__(self, device="cpu"):
        self._device = as_device(device, arg="Generator")
        self._lock = threading.Lock()
        self._seed = DEFAULT_SEED
        self._offset = 0

    @property
    def device(self) -> Device:
        return self._device

    def manual_seed(self, seed) -> "Generator":
        """Set the seed (an int in [-2**63, 2**64); negative values wrap) and reset the offset to 0.

        Raises:
            RuntimeError: a non-integer seed. ValueError: a seed outside that range.
        """
        s = _seed_value(seed, "manual_seed")
        with self._lock:
            self._seed, self._offset = s, 0
        return self

    def seed(self) -> int:
        """Seed from ``os.urandom`` (non-deterministic); returns the seed."""
        s = _random_seed()
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        """The seed set last (an int in [0, 2**64))."""
        return self._seed

    def get_offset(self) -> int:
        """The next unused Philox block counter."""
        return self._offset

    def set_offset(self, offset: int) -> "Generator":
        """Move the stream to block ``offset`` (an int in [0, 2**64)).

        Raises:
            RuntimeError: an offset outside that range.
        """
        off = operator.index(offset)
        check(0 <= off < _U64, lambda: f"set_offset: offset must be in [0, 2**64), got {off}")
        with self._lock:
            self._offset = off
        return self

    def get_state(self):
        """The state as a 16-byte ``uint8`` CPU tensor: seed then offset, little-endian uint64."""
        from ..tensor.core import from_host_array
        from ..dtypes import table as T
        with self._lock:
            raw = np.array([self._seed, self._offset], dtype="<u8").view(np.uint8)
        return from_host_array(raw, T.uint8, Device("cpu"))

    def set_state(self, new_state) -> "Generator":
        """Restore a state from :meth:`get_state`.

        Raises:
            TypeError: ``new_state`` is not a ``uint8`` tensor ("RNG state must be a torch.ByteTensor").
            RuntimeError: it does not hold 16 bytes.
        """
        from ..tensor.core import Tensor
        from ..dtypes import table as T
        check(isinstance(new_state, Tensor) and new_state.dtype is T.uint8,
              "set_state: RNG state must be a torch.ByteTensor (an nbx.uint8 tensor)", TypeError)
        check(new_state.numel() == STATE_BYTES, lambda: f"set_state: expected a Philox RNG state of {STATE_BYTES} "
              f"bytes (seed, offset) but found the input RNG state size to be {new_state.numel()}")
        raw = np.ascontiguousarray(new_state.cpu().numpy().reshape(-1))
        s, off = (int(v) for v in raw.view("<u8"))
        with self._lock:
            self._seed, self._offset = s, off
        return self

    def reserve(self, nblocks: int) -> tuple[int, int]:
        """Reserve ``nblocks`` Philox blocks for one draw: returns ``(seed, first_block)`` and advances the offset.

        Raises:
            RuntimeError: the draw would run past counter 2**64 (the stream is exhausted; reseed or set_offset).
        """
        n = int(nblocks)
        assert n >= 0, n
        with self._lock:
            start = self._offset
            check(start + n <= _U64, lambda: f"Generator: the Philox counter would pass 2**64 (offset {start}, draw "
                  f"of {n} blocks); reseed the generator or set_offset()")
            self._offset = start + n
            return self._seed, start

    def __repr__(self) -> str:
        return f"nbx.Generator(device='{self._device}', seed={self._seed}, offset={self._offset})"


# ---------------------------------------------------------------------------------------------------------
# Default generators, one per device
# ---------------------------------------------------------------------------------------------------------
_defaults_lock = threading.Lock()
_global_seed = _random_seed()
_defaults: dict[Device, Generator] = {}


def default_generator_for(device) -> Generator:
    """The default generator of ``device`` (created on first use with the last global seed)."""
    dev = as_device(device)
    with _defaults_lock:
        g = _defaults.get(dev)
        if g is None:
            g = Generator(dev).manual_seed(_global_seed)
            _defaults[dev] = g
        return g


default_generator = default_generator_for("cpu")


def manual_seed(seed) -> Generator:
    """Seed the default generators of every device, including those created later (``torch.manual_seed``).

    Returns:
        The default CPU generator.

    Raises:
        RuntimeError: a non-integer seed. ValueError: a seed outside [-2**63, 2**64).
    """
    global _global_seed
    s = _seed_value(seed, "manual_seed")
    with _defaults_lock:
        _global_seed = s
        gens = list(_defaults.values())
    for g in gens:
        g.manual_seed(s)
    return default_generator


def seed() -> int:
    """Seed every default generator with one non-deterministic 64-bit seed and return it (``torch.seed``)."""
    s = _random_seed()
    manual_seed(s)
    return s


def initial_seed() -> int:
    """The initial seed of the default CPU generator (``torch.initial_seed``)."""
    return default_generator.initial_seed()


def get_rng_state():
    """The default CPU generator's state (``torch.get_rng_state``): a 16-byte uint8 tensor."""
    return default_generator.get_state()


def set_rng_state(new_state) -> None:
    """Restore the default CPU generator's state (``torch.set_rng_state``)."""
    default_generator.set_state(new_state)


def resolve_generator(generator, device, fn: str) -> Generator:
    """The generator a draw on ``device`` uses: ``generator`` checked, or the device's default.

    Raises:
        TypeError: ``generator`` is not an ``nbx.Generator``.
        RuntimeError: the generator belongs to another device (PyTorch's "Expected a 'cuda' device type for
            generator but found 'cpu'").
    """
    dev = as_device(device)
    if generator is None:
        return default_generator_for(dev)
    if not isinstance(generator, Generator):
        fail(f"{fn}(): argument 'generator' must be nbx.Generator, not {type(generator).__name__}", TypeError)
    check(generator.device.type == dev.type, lambda: f"{fn}: Expected a '{dev.type}' device type for generator but "
          f"found '{generator.device.type}'")
    check(generator.device == dev, lambda: f"{fn}: the generator is on {generator.device} but the output is on {dev}")
    return generator
