"""``Pending : Yes`` in a pasted ``nvidia-smi -q`` fragment (``grep -A4 "Remapped Rows"``): a row
remap (or, on older GPUs, a page retirement) waits for the next GPU reset. It is context for the
operator, never a failure on its own; the ECC/MIG/driver-model ``Pending`` lines are not it."""

from __future__ import annotations

from gpulib.diagnose import diagnose

FRAGMENT = ("ops@gx-7:~$ nvidia-smi -q -i 3 | grep -A4 \"Remapped Rows\"\n    Remapped Rows\n"
            "        Correctable Error                 : 0\n        Uncorrectable Error               : 1\n"
            "        Pending                           : {pending}\n"
            "        Remapping Failure Occurred        : No\n")


def _found(tmp_path, text: str):
    (tmp_path / "session.txt").write_text(text)
    d = diagnose([tmp_path])
    return d, [f for f in d.findings if f.id.startswith("sig-remap-pending")]


def test_a_pending_remap_in_a_fragment_is_reported_as_context(tmp_path):
    d, found = _found(tmp_path, FRAGMENT.format(pending="Yes"))
    assert [(f.role, f.category) for f in found] == [("context", "gpu_memory_error")]
    assert d.interruption == "none"


def test_control_no_pending_remap_and_other_pending_labels_say_nothing(tmp_path):
    text = FRAGMENT.format(pending="No") + "    ECC Mode\n        Current                           : Enabled\n" \
                                           "        Pending                           : Enabled\n"
    _d, found = _found(tmp_path, text)
    assert found == []
