"""The merged file written in place (:mod:`spatec.exec.inplace`) is byte for byte the file
the parts put end to end make (:func:`spatec.exec.commit.concatenate`), whatever the ranges
(empty ones, one line, non-ASCII texts), the order the write tasks run in, and the format."""
from __future__ import annotations

import json

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spatec.exec.commit import concatenate
from spatec.exec.inplace import layout, prepare, write_at
from spatec.runners.spark.executor import write_text_part
from spatec.sinks.files import GEOJSON_BETWEEN, GEOJSON_HEAD, GEOJSON_TAIL

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters='"\\\n'), max_size=12)


def _part(texts: list, fmt: str) -> pa.Table:
    lines = [json.dumps({"v": t}, ensure_ascii=False) + ("\n" if fmt == "jsonl" else "") for t in texts]
    return pa.table({"value": pa.array(lines, pa.string())})


@settings(max_examples=60, deadline=None)
@given(ranges=st.lists(st.lists(TEXT, max_size=5), min_size=1, max_size=6),
       fmt=st.sampled_from(["jsonl", "geojson"]), order=st.randoms(use_true_random=False))
def test_a_file_written_in_place_is_the_parts_end_to_end(tmp_path_factory, ranges, fmt, order):
    d = tmp_path_factory.mktemp("inplace")
    parts = [_part(texts, fmt) for texts in ranges]
    files = []
    for r, t in enumerate(parts):
        files.append(d / f"part-{r:05d}")
        write_text_part(t, str(files[-1]), fmt)
    want = d / "want"
    if fmt == "geojson":
        concatenate(files, want, GEOJSON_HEAD.encode(), GEOJSON_BETWEEN.encode(), GEOJSON_TAIL.encode())
    else:
        concatenate(files, want)
    sizes = {r: (sum(len(v.encode()) for v in t.column("value").to_pylist()), t.num_rows)
             for r, t in enumerate(parts) if t.num_rows}
    lay = layout(str(d / "got"), sizes, fmt)
    prepare(lay, fmt)
    todo = [r for r, t in enumerate(parts) if t.num_rows]
    order.shuffle(todo)                 # (the write tasks run in any order)
    for r in todo:
        assert write_at(parts[r], lay, r, fmt) == parts[r].num_rows
    assert (d / "got").read_bytes() == want.read_bytes()
    if fmt == "geojson":
        assert len(json.loads((d / "got").read_text())["features"]) == sum(len(x) for x in ranges)


def test_a_part_of_another_size_than_laid_out_is_refused(tmp_path):
    t = _part(["a", "b"], "jsonl")
    lay = layout(str(tmp_path / "f.jsonl"), {0: (5, 1)}, "jsonl")
    prepare(lay, "jsonl")
    with pytest.raises(RuntimeError, match="range 0 of f.jsonl is 22 bytes where 5 were laid out"):
        write_at(t, lay, 0, "jsonl")
    assert (tmp_path / "f.jsonl").read_bytes() == b"\0" * 5         # nothing written over
