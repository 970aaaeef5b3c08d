"""A fake raw-memory provider, so every rule of the caching allocator is tested with no GPU.

``FakeRaw`` hands out segments from a simulated address space with a capacity, records every call, and gives
events that complete only when the test says so (``complete(stream)``), like work still running on a stream.
"""

from __future__ import annotations


class FakeEvent:
    def __init__(self, stream: int):
        self.stream = stream
        self.done = False
        self.released = False


class FakeRaw:
    """The ``RawMemory`` protocol over integers: capacity in bytes, 512-byte aligned segments."""

    BASE = 0x7F00_0000_0000

    def __init__(self, capacity: int = 1 << 30, total: int | None = None):
        self.capacity = capacity
        self.total = capacity if total is None else total
        self.next = self.BASE
        self.live: dict[int, int] = {}
        self.calls: list[tuple] = []
        self.events: list[FakeEvent] = []
        self.fail_next = 0          # make the next N mallocs fail regardless of capacity
        self.on_malloc = None       # a hook run inside malloc (to test re-entrant frees)
        self.syncs = 0

    @property
    def used(self) -> int:
        return sum(self.live.values())

    def malloc(self, nbytes: int) -> int:
        from nbxtensor.memory import RawOutOfMemory
        self.calls.append(("malloc", nbytes))
        if self.on_malloc is not None:
            hook, self.on_malloc = self.on_malloc, None
            hook()
        if self.fail_next > 0:
            self.fail_next -= 1
            raise RawOutOfMemory(nbytes)
        if self.used + nbytes > self.capacity:
            raise RawOutOfMemory(nbytes)
        p = self.next
        self.next += (nbytes + 4095) // 4096 * 4096 + 4096   # a gap: segments are never adjacent
        self.live[p] = nbytes
        return p

    def free(self, ptr: int) -> None:
        self.calls.append(("free", ptr))
        assert ptr in self.live, f"fake raw: free of unknown segment 0x{ptr:x}"
        del self.live[ptr]

    def mem_get_info(self) -> tuple[int, int]:
        return self.capacity - self.used, self.total

    def record_event(self, stream: int) -> FakeEvent:
        ev = FakeEvent(stream)
        self.events.append(ev)
        return ev

    def event_done(self, ev: FakeEvent) -> bool:
        return ev.done

    def event_release(self, ev: FakeEvent) -> None:
        assert not ev.released
        ev.released = True

    def synchronize(self) -> None:
        self.syncs += 1
        for ev in self.events:
            ev.done = True

    def complete(self, stream: int | None = None) -> None:
        for ev in self.events:
            if stream is None or ev.stream == stream:
                ev.done = True
