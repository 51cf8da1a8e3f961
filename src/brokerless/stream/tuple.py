"""The tuple: values with the fields, source component, stream and task they came from."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from random import getrandbits
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from .acker import CountedTree

#: A tuple's place in the spout tuples' trees it belongs to: ``{root: its edge id}`` (Storm's
#: XOR acking), or the trees themselves where they are counted in place (``acker.py``).
Anchors: TypeAlias = "dict[int, int] | tuple[CountedTree, ...]"


class Fields:
    """The field names of one stream, with lookup by name (shared by all its tuples)."""

    __slots__ = ("_index", "names")

    def __init__(self, names: Sequence[str]) -> None:
        self.names: tuple[str, ...] = tuple(names)
        self._index = {name: i for i, name in enumerate(self.names)}

    def index(self, name: str) -> int:
        try:
            return self._index[name]
        except KeyError:
            raise KeyError(f"no field {name!r}; the fields are {list(self.names)}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __len__(self) -> int:
        return len(self.names)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Fields) and other.names == self.names

    def __hash__(self) -> int:
        return hash(self.names)

    def __repr__(self) -> str:
        return f"Fields({list(self.names)!r})"


class Tuple:
    """One tuple as a bolt receives it: ``tup[0]``, ``tup["word"]``, ``tup.values``.

    ``component``, ``stream`` and ``task`` say where it came from.  ``id`` identifies it in
    its spout tuple's tree (None when it is not anchored to any spout tuple).
    """

    __slots__ = (
        "_ack_val",
        "_anchors",
        "_fields",
        "_own_id",
        "_settled",
        "component",
        "stream",
        "task",
        "values",
    )

    def __init__(
        self,
        values: tuple[Any, ...],
        component: str,
        stream: str,
        task: int,
        fields: Fields,
        anchors: Anchors | None = None,
    ) -> None:
        self.values = values
        self.component = component
        self.stream = stream
        self.task = task
        self._fields = fields
        self._anchors = anchors  # see Anchors
        self._ack_val = 0  # XOR of the edge ids of the tuples emitted anchored to this one
        self._settled = False  # acked or failed

    @property
    def fields(self) -> tuple[str, ...]:
        return self._fields.names

    @property
    def id(self) -> int | None:
        anchors = self._anchors
        if not anchors:
            return None
        if isinstance(anchors, tuple):
            # Counted in place (acker.py): no edge ids; a random one of its own, drawn the first
            # time it is asked for (a slot never set costs a tuple nothing).
            try:
                return self._own_id
            except AttributeError:
                self._own_id: int = getrandbits(64)
                return self._own_id
        edge = 0
        for value in anchors.values():
            edge ^= value
        return edge

    def __getitem__(self, key: int | str) -> Any:
        if key.__class__ is str:
            return self.values[self._fields.index(key)]
        # an int: the str case is above (``__class__ is`` is cheaper than isinstance, and mypy
        # does not narrow on it)
        return self.values[key]  # type: ignore[index]

    def get(self, name: str, default: Any = None) -> Any:
        """The value of field ``name``, or ``default`` when the stream has no such field."""
        if name in self._fields:
            return self.values[self._fields.index(name)]
        return default

    def as_dict(self) -> dict[str, Any]:
        return dict(zip(self._fields.names, self.values, strict=True))

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.values)

    def __repr__(self) -> str:
        return (
            f"<Tuple {self.component}:{self.stream} task={self.task} "
            f"{dict(zip(self._fields.names, self.values, strict=False))!r}>"
        )
