import random

import pytest

from cdc_lib.changes.events import TableChanges


def test_last_change_per_key_wins() -> None:
    changes = TableChanges(key_positions=(0,))
    changes.insert((1, "a"))
    changes.update((1, "a"), (1, "b"))
    changes.insert((2, "x"))
    changes.delete((2, "x"))
    assert changes.rows == {(1,): ("upsert", (1, "b")), (2,): ("delete", None)}
    assert (changes.inserted, changes.updated, changes.deleted) == (2, 1, 1)


def test_key_change_deletes_old_key_and_upserts_new() -> None:
    changes = TableChanges(key_positions=(0, 1))
    changes.update((1, 1, "v"), (1, 2, "v"))
    assert changes.deleted_keys() == [(1, 1)]
    assert changes.upserts() == [(1, 2, "v")]


def test_insert_update_delete_reinsert_ends_as_upsert() -> None:
    changes = TableChanges(key_positions=(0,))
    changes.insert((7, "a"))
    changes.update((7, "a"), (7, "b"))
    changes.delete((7, "b"))
    changes.insert((7, "c"))
    assert changes.upserts() == [(7, "c")]
    assert changes.deleted_keys() == []


def test_merge_from_applies_later_transaction_on_top() -> None:
    first = TableChanges(key_positions=(0,))
    first.insert((1, "a"))
    later = TableChanges(key_positions=(0,))
    later.delete((1, "a"))
    later.truncate()
    later.insert((3, "z"))
    first.merge_from(later)
    assert first.truncated
    assert first.rows == {(3,): ("upsert", (3, "z"))}


def test_new_keys_are_those_first_touched_by_an_insert() -> None:
    batch = TableChanges(key_positions=(0,))
    first = TableChanges(key_positions=(0,))
    first.update((4, "old"), (4, "kept"))  # existed before: updated
    first.insert((9, "a"))
    first.delete((13, "gone"))
    batch.merge_from(first)
    later = TableChanges(key_positions=(0,))
    later.insert((13, "back"))  # deleted earlier in the batch, so it was there before it: not new
    later.update((9, "a"), (9, "b"))
    later.insert((21, "short-lived"))
    later.delete((21, "short-lived"))
    later.update((4, "kept"), (33, "moved"))  # the key moved: 33 is not taken as new
    batch.merge_from(later)
    assert batch.new_keys == {(9,), (21,)}
    appended, rest = batch.split_new()
    assert appended == [(9, "b")], "a new key deleted again is in neither part"
    assert rest.rows == {(4,): ("delete", None), (13,): ("upsert", (13, "back")), (33,): ("upsert", (33, "moved"))}


def test_a_truncate_forgets_new_keys() -> None:
    batch = TableChanges(key_positions=(0,))
    first = TableChanges(key_positions=(0,))
    first.insert((5, "a"))
    batch.merge_from(first)
    later = TableChanges(key_positions=(0,))
    later.truncate()
    batch.merge_from(later)
    assert batch.new_keys == set() and batch.truncated


# -- a whole rows event at once (insert_rows, update_rows, delete_rows) ---------------------------------------------


def _row_by_row(changes: TableChanges, kind: str, images: list[tuple[object, ...]]) -> None:
    if kind == "insert":
        for row in images:
            changes.insert(row)
    elif kind == "delete":
        for row in images:
            changes.delete(row)
    else:
        for before, after in zip(images[0::2], images[1::2], strict=True):
            changes.update(before, after)


def _at_once(changes: TableChanges, kind: str, images: list[tuple[object, ...]]) -> None:
    {"insert": changes.insert_rows, "delete": changes.delete_rows, "update": changes.update_rows}[kind](images)


def _state(changes: TableChanges) -> tuple[object, ...]:
    return (list(changes.rows.items()), changes.new_keys, changes.inserted, changes.updated, changes.deleted)


@pytest.mark.parametrize("key_positions", [(0,), (0, 1), (1, 0)])
@pytest.mark.parametrize("seed", range(40))
def test_a_rows_event_folded_at_once_is_the_row_by_row_fold(key_positions: tuple[int, ...], seed: int) -> None:
    """Random events over few keys (re-inserts, deletes of new keys, key-changing updates, repeated keys in one
    event): the rows (in their order), the new keys and the counts agree after every event."""
    chooser = random.Random(seed)
    one, other = TableChanges(key_positions), TableChanges(key_positions)
    for _ in range(30):
        kind = chooser.choice(["insert", "update", "delete"])
        count = chooser.randint(1, 6)

        def image() -> tuple[object, ...]:
            return (chooser.randint(0, 5), chooser.randint(0, 2), chooser.random())

        if kind == "update":
            images: list[tuple[object, ...]] = []
            for _ in range(count):
                before = image()
                moved = chooser.random() < 0.2
                images += [before, image() if moved else (before[0], before[1], chooser.random())]
        else:
            images = [image() for _ in range(count)]
        _row_by_row(one, kind, images)
        _at_once(other, kind, images)
        assert _state(other) == _state(one)


def test_update_rows_takes_the_general_path_when_a_key_moves() -> None:
    changes = TableChanges((0,))
    changes.update_rows([(1, "a"), (1, "b"), (2, "x"), (3, "x")])
    assert changes.rows == {(1,): ("upsert", (1, "b")), (2,): ("delete", None), (3,): ("upsert", (3, "x"))}
    assert changes.updated == 2


def test_update_rows_refuses_an_odd_image_count_like_the_row_by_row_fold() -> None:
    with pytest.raises(ValueError):
        TableChanges((0,)).update_rows([(1, "a"), (1, "b"), (2, "x")])
