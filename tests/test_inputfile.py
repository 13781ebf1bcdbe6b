"""netsim.inputfile: every input file is a regular, capped, UTF-8 file, refused with its name and place."""

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim import inputfile
from netsim.errors import ConfigError
from netsim.experiment.outdir import OutputError, check_new_file


def _refused(fn, *args, **kw) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        fn(*args, **kw)
    return info.value


def test_what_is_not_a_regular_readable_file_is_refused_by_name(tmp_path):
    missing = tmp_path / "nope.csv"
    assert _refused(inputfile.read_text, missing, what="job trace").format() == f"{missing}: job trace not found"
    dangling = tmp_path / "dangling.csv"
    dangling.symlink_to(tmp_path / "gone.csv")
    assert "symlink to a missing file" in _refused(inputfile.read_text, dangling).message
    loop = tmp_path / "loop.csv"
    loop.symlink_to(loop)
    assert _refused(inputfile.read_text, loop, what="route table").message == "route table is a symlink loop"
    assert _refused(inputfile.read_text, tmp_path, what="schedule").message == "a directory, not a schedule"
    zero = tmp_path / "zero.csv"
    zero.symlink_to("/dev/zero")  # read until memory runs out if it were opened
    error = _refused(inputfile.read_bytes, zero)
    assert "not a regular file" in error.message and error.file == str(zero)


def test_size_cap(tmp_path):
    f = tmp_path / "big.csv"
    f.write_bytes(b"x" * 101)
    error = _refused(inputfile.read_bytes, f, limit=100, what="routing matrix")
    assert error.message == "routing matrix too large: 101 bytes (limit 100 bytes)"
    assert inputfile.read_bytes(f, limit=101) == b"x" * 101


def test_text_must_be_utf8_without_nul_and_the_line_is_named(tmp_path):
    f = tmp_path / "t.csv"
    f.write_bytes(b"a,b\n1,2\n\n3,\xff\n")
    error = _refused(inputfile.read_text, f)
    assert error.line == 4 and "byte 0xff at line 4" in error.message and error.format().startswith(f"{f}:4: ")
    f.write_bytes(b"a\n\x00\n")
    assert _refused(inputfile.read_text, f).line == 2
    f.write_bytes(b"\xef\xbb\xbfa,b\n")  # a byte-order mark is dropped
    assert inputfile.read_text(f) == "a,b\n"


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_any_bytes_read_as_text_or_refused_never_another_error(tmp_path_factory, raw):
    f = tmp_path_factory.mktemp("b") / "f.csv"
    f.write_bytes(raw)
    try:
        text = inputfile.read_text(f)
    except ConfigError as exc:
        assert exc.file == str(f)
    else:
        assert "\0" not in text and text.encode() in (raw, raw[3:])


def test_parquet_damaged_or_with_a_repeated_column_is_refused(tmp_path):
    good = tmp_path / "s.parquet"
    pq.write_table(pa.table({"a": [1, 2], "b": [3.0, 4.0]}), good)
    assert inputfile.read_parquet(good).num_rows == 2
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(good.read_bytes()[:-20])
    assert "not a readable Parquet file" in _refused(inputfile.read_parquet, bad).message
    text = tmp_path / "t.parquet"
    text.write_text("a,b\n1,2\n")
    assert "not a readable Parquet file" in _refused(inputfile.read_parquet, text).message
    twice = tmp_path / "twice.parquet"
    pq.write_table(pa.Table.from_arrays([pa.array([1]), pa.array([2])], names=["a", "a"]), twice)
    assert _refused(inputfile.read_parquet, twice).message == "column 'a' appears 2 times; each column once"


def test_rows_are_counted_from_one_and_lines_as_they_are():
    assert inputfile.at_row("t.parquet", 0, "gpus", "got -1").format() == "t.parquet: row 1, column 'gpus': got -1"
    assert inputfile.at_line("t.csv", 7, "gpus", "got -1").format() == "t.csv:7: column 'gpus': got -1"


def test_no_output_is_one_of_the_inputs_even_with_force(tmp_path):
    src = tmp_path / "exp.yaml"
    src.write_text("name: x\n")
    link = tmp_path / "link.yaml"
    link.symlink_to(src)
    for out in (src, link, tmp_path / "." / "exp.yaml"):
        with pytest.raises(ConfigError):
            inputfile.refuse_overwrite(out, [src])
        with pytest.raises(OutputError, match="input"):
            check_new_file(out, force=True, inputs=[src])
    inputfile.refuse_overwrite(tmp_path / "new.parquet", [src])
    with pytest.raises(OutputError, match="must end in .csv"):
        check_new_file(tmp_path / "s.parquet", suffixes=(".csv",), option="--csv")
    check_new_file(tmp_path / "S.CSV", suffixes=(".csv",))
    assert src.read_text() == "name: x\n" and os.path.islink(link)


def test_a_sweeps_input_files_are_read_once_each_before_any_run(tmp_path, monkeypatch):
    import yaml

    from netsim.config import load_experiment
    from netsim.experiment.inputs import check_input_files
    from netsim.experiment.sweep import expand
    from netsim.routing import table

    root = os.path.dirname(os.path.dirname(__file__))
    data = yaml.safe_load(open(os.path.join(root, "experiments", "routes-table.yaml")))
    data["variants"] = [{"name": "a"}, {"name": "b", "seed": 2}, {"name": "c", "workload": {"size": "1MiB"}}]
    (tmp_path / "routes-table.csv").write_text(open(os.path.join(root, "experiments", "routes-table.csv")).read())
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(data))
    reads = []
    real = table.read_table
    monkeypatch.setattr(table, "read_table", lambda f, t: reads.append(f) or real(f, t))
    specs = [r.spec for r in expand(load_experiment(tmp_path / "exp.yaml", []))]
    assert len(specs) == 3 and check_input_files(specs) == 1 and len(reads) == 1
    (tmp_path / "routes-table.csv").write_text("src,dst,channel,path\n7,8,0,leaf0 spine9 leaf1\n")
    with pytest.raises(ConfigError) as info:
        check_input_files(specs)
    assert "routes-table.csv" in info.value.format()
