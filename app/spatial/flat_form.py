"""``FlatWhileMoving``: an index that empties its structure into a flat copy while (nearly)
every object moves every frame, and builds it again when the motion calms.

With every object moving, every move walks the structure (a tree: 20-30 ns an object at
10^5, plus its upkeep; Matthews' view distance tree: 12-35 ns) for a query that then saves
little: the brute force writes a float32 row and scans. So after two update batches in a
row that move at least :attr:`~FlatWhileMoving.flat_fraction` of the objects (or one that
moves all of them), the structure empties and the objects go to a
:class:`~app.spatial.flat.FlatCopy` (the ``brute`` index's copy by slot, its one-pass moves
and its scan); a batch below :attr:`~FlatWhileMoving.tree_fraction` builds the structure
again, as a build does. The switch changes no answer.

The mixin takes the store's hooks (``_on_insert``, ``_on_remove``, ``_grow``,
``_apply_update`` / ``_on_update``) and hands them to ``self._flat`` while that is set, else
to the structure's own: the class using it provides :meth:`_insert_in_structure`,
:meth:`_remove_from_structure`, :meth:`_grow_structure`, :meth:`_move_in_structure` (a
checked update batch's moves, writing the store's rows in the same pass) and
:meth:`_empty_structure` (what a new index holds), calls :meth:`_init_flat` once, and in
each of its queries hands over to ``self._flat`` while :meth:`_still_flat` says so (see
``app.spatial.aabbtree.tree``).
"""

from __future__ import annotations

import numpy as np

from app.spatial import moves
from app.spatial.checks import lossless_batch
from app.spatial.flat import FlatCopy


class FlatWhileMoving:
    """The form switch, mixed into a :class:`~app.spatial.base.SpatialIndex`."""

    #: A batch moving at least this share of the objects counts as big: two in a row (or one
    #: of every object) empty the structure into the flat copy ...
    flat_fraction = 0.5
    #: ... and a batch below this share while flat builds the structure again.
    tree_fraction = 0.25
    #: ... never below this many objects (a small scene's structure costs little either way).
    flat_min_objects = 4096
    #: Queries a frame may make after its update (a paused scene's queries build the
    #: structure again after twice as many, see :meth:`_still_flat`; past it, an AABB tree's
    #: queries run the upkeep themselves).
    frame_queries = 2

    def _init_flat(self, allowed: bool) -> None:
        """The switch's state: flat form ``allowed`` or never."""
        self._may_go_flat = bool(allowed)
        self._flat: FlatCopy | None = None  # the objects while flat (the structure is empty)
        self._big_batches = 0  # update batches in a row that moved at least flat_fraction
        self._flat_queries = 0  # the most queries seen between two updates while flat
        self._queries_since_update = self.frame_queries

    def _empty_structure(self) -> None:
        """Reset the index's own structure to what a new, empty index holds."""
        raise NotImplementedError

    def _structure_wanted(self) -> bool:
        """Whether the structure is to stay whatever the motion (True: the index does not go
        flat at this batch); asked once an update batch. The default never insists."""
        return False

    # The store's hooks (ObjectStore): the flat copy while it is set, else the structure's.

    def _on_insert(self, slots: np.ndarray) -> None:
        if self._flat is not None:
            self._flat.inserted(self, slots)
        else:
            self._insert_in_structure(slots)

    def _on_remove(self, slots: np.ndarray) -> None:
        if self._flat is not None:
            self._flat.removed(slots)
        else:
            self._remove_from_structure(slots)

    def _grow(self, new_capacity: int) -> None:
        self._grow_structure(new_capacity)
        if self._flat is not None:
            self._flat.grow(new_capacity)

    def _insert_in_structure(self, slots: np.ndarray) -> None:
        """New objects at ``slots`` (the store holds them) into the structure."""
        raise NotImplementedError

    def _remove_from_structure(self, slots: np.ndarray) -> None:
        """Objects at ``slots`` (the store still holds them) out of the structure."""
        raise NotImplementedError

    def _grow_structure(self, new_capacity: int) -> None:
        """The structure's per-slot arrays grown to ``new_capacity`` slots (also while flat:
        the structure's slot arrays are kept for when it is built again)."""
        raise NotImplementedError

    def _apply_update(self, slots: np.ndarray, centers: np.ndarray, radii: np.ndarray | None,
                      vd: np.ndarray | None) -> None:
        """A checked batch: while flat, the store's write and then the flat copy's rows
        (:meth:`_on_update`); else the structure's own pass, which writes the store's rows
        as it goes (:meth:`_move_in_structure`: its kernel reads the mover's rows anyway)."""
        if self._flat is not None:
            super()._apply_update(slots, centers, radii, vd)  # type: ignore[misc]
        else:
            self._move_in_structure(slots, centers, radii, vd)

    def _move_in_structure(self, slots: np.ndarray, centers: np.ndarray,
                           radii: np.ndarray | None, vd: np.ndarray | None) -> None:
        """The structure's moves of a checked batch (``radii``, ``vd``: None where the batch
        leaves them), writing the store's rows as they go."""
        raise NotImplementedError

    def _on_update(self, slots: np.ndarray, old_centers: np.ndarray, old_radii: np.ndarray,
                   old_vdist: np.ndarray) -> None:
        """While flat (see :meth:`_apply_update`): the flat copy's rows."""
        self._flat.copied(self, slots)

    def _validate_flat(self, structure_empty: bool, what: str) -> None:
        """``validate()`` while flat: the structure holds nothing (``structure_empty``;
        ``what`` says otherwise in the message) and the flat copy matches the store."""
        if not structure_empty:
            raise AssertionError(f"{self.describe()}: flat, but {what}")
        wrong = self._flat.check(self)
        if wrong:
            raise AssertionError(f"{self.describe()}: flat: {wrong}")

    @property
    def is_flat(self) -> bool:
        """Whether the objects are in the flat copy (everything moves) rather than the
        index's structure."""
        return self._flat is not None

    def update(self, ids: np.ndarray, centers: np.ndarray, radii: np.ndarray | None = None,
               view_distances: np.ndarray | None = None) -> None:
        """Move objects: through the index's structure or, while flat, in the flat copy's
        one-pass paths (``app.spatial.flat``); a bad batch the contract's general path, which
        names what is wrong."""
        ids, centers, radii, view_distances = lossless_batch(ids, centers, radii,
                                                             view_distances)
        if self._may_go_flat:
            self._choose_form(len(ids) if np.ndim(ids) == 1 else 0)
        if self._flat is not None:
            self._flat_queries = max(self._flat_queries, self._queries_since_update)
            self._queries_since_update = 0
            batch = moves.batch_of(ids, centers, radii, view_distances)
            if batch is not None and self._flat.move(self, batch):
                return
        self._update_lossless(ids, centers, radii, view_distances)  # type: ignore[attr-defined]

    def _still_flat(self) -> bool:
        """Whether a query finds the objects flat. The scene may have stopped moving (the
        viewer paused): no batch comes to say so, so a query after twice as many others
        without an update as a frame makes (the most seen between two updates while flat,
        at least ``frame_queries``) builds the structure again first; a frame of many
        queries (occlusion's two, pairs, picking) stays flat while its updates keep coming."""
        if self._flat is None:
            return False
        self._queries_since_update += 1
        if self._queries_since_update > 2 * max(self._flat_queries, self.frame_queries):
            self._go_structure()
            return False
        return True

    def _choose_form(self, moved: int) -> None:
        """Go flat after two big batches in a row (or one of every object), back to the
        structure after a small one (see :attr:`flat_fraction`)."""
        count = self._count
        big = count > 0 and moved >= self.flat_fraction * count
        self._big_batches = self._big_batches + 1 if big else 0
        wanted = self._structure_wanted()
        if self._flat is None:
            if (count >= self.flat_min_objects and (self._big_batches >= 2 or moved >= count)
                    and not wanted):
                self._go_flat()
        elif moved < self.tree_fraction * count:
            self._go_structure()

    def _go_flat(self) -> None:
        """Every object out of the structure into a flat copy. The store's columns become
        plain arrays (a structure may have bound them into rows, :mod:`app.spatial.rows`):
        the flat copy streams them whole, and rows are more to stream (moving `spawn`,
        kd/leafy at 10^5, centres alone in 32-byte rows: 0.41 ms a frame plain, 0.45 in
        rows)."""
        live = np.flatnonzero(self._alive).astype(np.int64)
        self._empty_structure()
        self._set_slot_columns(tuple(np.ascontiguousarray(a) for a in self._slot_columns()))
        self._flat = FlatCopy(self.capacity)
        self._flat_queries = 0
        if live.shape[0]:
            self._flat.inserted(self, live)

    def _go_structure(self) -> None:
        """Every object back into the structure, as a build puts them."""
        self._flat = None
        self._bind_rows()
        live = np.flatnonzero(self._alive).astype(np.int64)
        if live.shape[0]:
            self._on_insert(live)

    def _bind_rows(self) -> None:
        """Bind the store's columns into rows with the structure's words, if it keeps them
        so (:mod:`app.spatial.rows`); by default it does not."""
