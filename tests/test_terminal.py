"""Escape sequences from evidence never reach the terminal raw: a log line, a file name, a tensor
name or a pickle key carrying OSC 0 (window title), CSI 2J (clear screen), an OSC 8 hyperlink,
a carriage return or a right-to-left override is printed with those characters as visible
``\\uXXXX`` escapes, by every command and in the notebooks' text; JSON output stays the same JSON."""

from __future__ import annotations

import json
import os
import struct

import pytest

from gpulib.cli import main
from gpulib.terminal import safe

TITLE = "\x1b]0;all GPUs healthy\x07"  # OSC 0: renames the terminal window
CLEAR = "\x1b[2J\x1b[H"  # CSI: clears the screen, cursor home
LINK = "\x1b]8;;http://127.0.0.1:8/x\x1b\\see runbook\x1b]8;;\x1b\\"  # OSC 8: text that opens another URL
C1 = "\x9b31m"  # 8-bit CSI
BIDI = "\u202eevil\u202c"
PAYLOAD = TITLE + CLEAR + LINK + C1 + BIDI + "\rfake line"
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\r")


def _clean(text: str) -> None:
    leaked = [repr(c) for c in RAW if c in text]
    assert not leaked, f"raw control characters reached the output: {leaked}: {text[:800]!r}"


def test_safe_escapes_every_control_class_and_keeps_newline_and_tab():
    assert safe("step 10\tloss 2.1\n") == "step 10\tloss 2.1\n"
    out = safe(PAYLOAD + "\x00\x7f\ud8ff")
    _clean(out)
    for escaped in ("\\u001b]0;", "\\u0007", "\\u001b[2J", "\\u009b", "\\u202e", "\\u000d", "\\u0000", "\\u007f",
                    "\\ud8ff"):
        assert escaped in out


def test_safe_output_is_the_same_json():
    """The escape is JSON's: filtering json.dumps output (also with ensure_ascii=False, which leaves
    DEL, C1, bidi and surrogates raw) gives valid JSON with the same value."""
    value = {"text": PAYLOAD + "\x7f\udcff", "host": "node-\u202e"}
    for ensure_ascii in (True, False):
        assert json.loads(safe(json.dumps(value, ensure_ascii=ensure_ascii))) == value


@pytest.fixture
def hostile_log(tmp_path):
    log = tmp_path / "node-b" / "kern.log"
    log.parent.mkdir()
    log.write_text(f"2026-06-07T08:09:10+0000 node-b kernel: NVRM: Xid (PCI:0000:3b:00): 79, {PAYLOAD} GPU has fallen "
                   "off the bus.\n", encoding="utf-8")
    return log


def test_diagnose_text_quotes_the_line_escaped(hostile_log, capsys):
    assert main(["diagnose", str(hostile_log)]) == 3
    out = capsys.readouterr().out
    _clean(out)
    assert "79, \\u001b]0;all GPUs healthy\\u0007\\u001b[2J" in out  # the quoted line: visible, inert


def test_diagnose_json_keeps_the_line_as_it_was(hostile_log, capsys):
    main(["diagnose", "--format", "json", str(hostile_log)])
    out = capsys.readouterr().out
    _clean(out)
    quoted = json.loads(out)["root_cause"]["evidence"][0]["text"]
    assert PAYLOAD in quoted  # the same string, as JSON escapes


def test_error_naming_a_hostile_path_is_escaped(tmp_path, capsys):
    assert main(["diagnose", str(tmp_path / f"inc{TITLE}")]) == 2
    err = capsys.readouterr().err
    _clean(err)
    assert "inc\\u001b]0;all GPUs healthy\\u0007: no such file or folder" in err


def test_watch_alert_quotes_the_line_escaped(tmp_path, capsys):
    log = tmp_path / "rank0.log"
    log.write_text(f"[rank0]: torch.OutOfMemoryError: CUDA out of memory. {PAYLOAD.replace(chr(13), ' ')}\n")
    main(["watch", "--log", str(log), "--from-start", "--once", "--max-seconds", "3s", "--poll", "0.1s",
          "--listen", "off"])
    out = capsys.readouterr().out
    _clean(out)
    assert "ALERT" in out and "\\u001b[2J" in out


def test_nccl_parse_problem_lines_are_escaped(tmp_path, capsys):
    result = tmp_path / f"allreduce{CLEAR}.txt"
    result.write_text(f"# nccl-tests {PAYLOAD}\n")
    assert main(["nccl-parse", str(result)]) == 2
    _clean(capsys.readouterr().out)


def _safetensors(path, names: list[str]) -> None:
    header, offset = {}, 0
    for name in names:
        header[name] = {"dtype": "F32", "shape": [1], "data_offsets": [offset, offset + 4]}
        offset += 4
    blob = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + b"\0" * offset)


def test_ckpt_inspect_tensor_names_are_escaped(tmp_path, capsys):
    model = tmp_path / "model.safetensors"
    _safetensors(model, [f"layer.0.weight{TITLE}", f"lm_head{LINK}"])
    main(["ckpt", "inspect", str(model)])
    out = capsys.readouterr().out
    _clean(out)
    assert "layer.0.weight\\u001b]0;" in out


def test_ckpt_inspect_pickle_keys_are_escaped(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    path = tmp_path / "ckpt_7.pt"
    torch.save({f"optimizer{CLEAR}": {"lr": 0.1}, f"model{TITLE}": {"w": torch.zeros(2)}, "epoch": 7}, path)
    main(["ckpt", "inspect", str(path)])
    out = capsys.readouterr().out
    _clean(out)
    assert "\\u001b[2J" in out or "\\u001b]0;" in out


def test_notebook_text_of_the_diagnosis_is_escaped(hostile_log, monkeypatch):
    from gpulib.diagnose import diagnose
    from gpulib.notebook import face as nbk

    shown = []
    monkeypatch.setattr(nbk, "display", lambda obj, **kw: shown.append(obj))
    nbk.show_diagnosis(diagnose([hostile_log]).to_dict(), interactive=False)
    text = "".join(o.get("text/plain", "") for o in shown if isinstance(o, dict))
    assert "fallen off the bus" in text
    _clean(text)


def test_notebook_tables_are_escaped():
    import pandas as pd

    from gpulib.notebook.display import readable

    cells = readable(pd.DataFrame({"line": [PAYLOAD], "host": [f"node{BIDI}"]}))
    _clean("".join(cells["line"]) + "".join(cells["host"]))


def test_a_latin1_file_name_stays_its_bytes_on_a_surrogateescape_stdout_its_c1_bytes_do_not():
    import io

    from gpulib.terminal import SafeStream

    raw = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="surrogateescape")
    stream = SafeStream(raw)
    stream.write(os.fsdecode(b"ckpt_\xff\xe9_\x9b2J.pt\n"))
    raw.flush()
    assert raw.buffer.getvalue() == b"ckpt_\xff\xe9_\\udc9b2J.pt\n"
    strict = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")  # a UTF-8 locale's stdout: would raise on them
    SafeStream(strict).write(os.fsdecode(b"ckpt_\xff.pt"))
    strict.flush()
    assert strict.buffer.getvalue() == b"ckpt_\\udcff.pt"


def test_stderr_keeps_the_progress_bars_carriage_return_and_nothing_else(capsys):
    import sys

    from gpulib.terminal import escaped_output

    with escaped_output():
        print(f"\rreading evidence: 3/8 files{TITLE}", file=sys.stderr, end="")
        print(f"step{CLEAR}")
    captured = capsys.readouterr()
    assert captured.err.startswith("\rreading evidence: 3/8 files\\u001b]0;") and "\x1b" not in captured.err
    assert captured.out == "step\\u001b[2J\\u001b[H\n"
    assert sys.stdout is not None and not hasattr(sys.stdout, "keep_cr")  # put back after the block
