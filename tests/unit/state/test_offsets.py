"""The state document without a store: its JSON layout and the lease it carries."""

import json

from cdc_lib.state.offsets import Lease, PipelineState, document_bytes


def test_a_stored_document_is_json_with_a_line_per_table() -> None:
    document = {
        "tables": {"z.t": {"pos": 7, "note": "Größe \"x\"", "ddl": [{"q": None}]}, "a.t": {}},
        "batch_seq": 12, "lease": None, "recent_batches": [{"rows": 3}], "empty": {}, "mixed": {"k": 1, "j": {"x": 2}},
    }
    text = document_bytes(document).decode()
    assert json.loads(text) == document
    lines = text.splitlines()
    table_line = '  "z.t": {"ddl": [{"q": null}], "note": "Gr\\u00f6\\u00dfe \\"x\\"", "pos": 7}'
    assert lines.index('  "a.t": {},') < lines.index(table_line)
    assert ' "mixed": {"j": {"x": 2}, "k": 1},' in lines


def test_a_live_holder_and_a_reused_pid() -> None:
    mine = Lease.for_this_process("x", seconds=60)
    assert mine.started_ticks is not None and not mine.holder_is_dead()
    mine.started_ticks += 1  # the PID now belongs to a process started at another time
    assert mine.holder_is_dead()


def test_lease_documents_round_trip_and_tolerate_unknown_fields() -> None:
    lease = Lease.for_this_process("a1b2", seconds=42)
    document = PipelineState(pipeline="p", lease=lease).to_json()
    document["lease"]["written_by_a_newer_binlake"] = 1
    assert PipelineState.from_json(document).lease == lease
