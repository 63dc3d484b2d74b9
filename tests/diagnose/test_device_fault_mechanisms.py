"""Three mechanisms for a GPU fault that the evidence names but a louder or earlier line hid:

- an uncorrectable ECC error reported through a CUDA error string needs service like the Xid it
  reports: it outranks an OOM of the rerun on the same node whose order against it the logs cannot
  tell (the rerun's OOM at start-up is the sick GPU's symptom);
- with no job log (a node's ``dmesg`` alone), a fault of a GPU itself (a contained memory error)
  outranks an older Xid 31 that the kernel pins on a process (``pid=..., name=python3``) on another GPU;
- a host that the writer marked with an arrow in a pasted table of hosts (``node  count  <--``) is
  the node the hostless evidence beside it is about.

Each has its negative control. Lines are in the tools' layouts; hosts, PIDs, PCI ids, times and
values are invented.
"""

from __future__ import annotations

from gpulib.diagnose import diagnose

TRACE = ("Traceback (most recent call last):\n"
         '  File "/srv/llm/train.py", line 88, in <module>\n'
         "    loss.backward()\n")
ECC_RUN = ("iteration    1200/   90000 | lm loss: 3.117E+00 | loss scale: 65536.0 |\n" + TRACE
           + "RuntimeError: CUDA error: uncorrectable ECC error encountered\n")
ILLEGAL_RUN = ("iteration    1200/   90000 | lm loss: 3.117E+00 | loss scale: 65536.0 |\n" + TRACE
               + "RuntimeError: CUDA error: an illegal memory access was encountered\n")
OOM_RERUN = ("[2024-03-02 11:40:07,512] [INFO] [engine.py:91:__init__] initializing model parallel seeds\n"
             "Traceback (most recent call last):\n"
             '  File "/srv/llm/train.py", line 31, in <module>\n'
             "    torch.distributed.barrier()\n"
             "RuntimeError: CUDA error: out of memory\n")


def _run(tmp_path, files: dict[str, str]) -> dict:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return diagnose([tmp_path]).to_dict()


def _answer(doc: dict) -> tuple:
    return doc["verdict"]["category"], doc["verdict"]["interruption"]


# ------------------------------------------------ an ECC named by CUDA vs the rerun's OOM
def test_an_uncorrectable_ecc_in_one_run_outranks_the_reruns_oom(tmp_path):
    doc = _run(tmp_path, {"pretrain-41.out": ECC_RUN, "pretrain-42.out": OOM_RERUN})
    assert _answer(doc) == ("gpu_memory_error", "hard")
    assert "uncorrectable ECC" in doc["root_cause"]["evidence"][0]["text"] + doc["verdict"]["summary"]


def test_the_reruns_oom_alone_stays_an_oom(tmp_path):
    assert _answer(_run(tmp_path, {"pretrain-42.out": OOM_RERUN})) == ("cuda_oom", "soft")


def test_an_illegal_address_beside_an_oom_is_no_hardware_fault(tmp_path):
    """The same two runs with a code bug instead of the ECC error: nothing names a GPU fault."""
    category, interruption = _answer(_run(tmp_path, {"pretrain-41.out": ILLEGAL_RUN, "pretrain-42.out": OOM_RERUN}))
    assert interruption == "soft" and category in ("cuda_oom", "application_error")


# ------------------------------------------------ a device fault vs a process's Xid, dmesg alone
XID31 = ("[Tue Mar  4 10:02:41 2025] NVRM: Xid (PCI:0000:41:00): 31, pid=771204, name=python3, Ch 00000010, "
         "intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_3 faulted @ 0x7f31_08000000. "
         "Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ\n")
XID43 = "[Tue Mar  4 10:02:42 2025] NVRM: Xid (PCI:0000:41:00): 43, pid=771204, name=python3, Ch 00000010\n"
XID94 = ("[Fri Mar  7 22:19:05 2025] NVRM: Xid (PCI:0000:c3:00): 94, pid='<unknown>', name=<unknown>, "
         "Contained: SM (0x1). RST: No, D-RST: No\n")


def test_with_dmesg_alone_a_contained_memory_error_outranks_an_older_process_fault(tmp_path):
    doc = _run(tmp_path, {"dmesg-T.txt": "root@gx-n31:~# dmesg -T | grep NVRM\n" + XID31 + XID43 + XID94})
    assert doc["verdict"]["category"] == "gpu_memory_error"
    assert (doc["root_cause"]["host"], doc["root_cause"]["gpu_pci"]) == ("gx-n31", "0000:c3:00.0")


def test_with_dmesg_alone_a_process_fault_without_a_device_fault_stays_the_processs(tmp_path):
    doc = _run(tmp_path, {"dmesg-T.txt": "root@gx-n31:~# dmesg -T | grep NVRM\n" + XID31 + XID43})
    assert _answer(doc) == ("application_error", "soft") and doc["root_cause"]["gpu_pci"] == "0000:41:00.0"


def test_with_a_job_log_a_later_device_fault_does_not_explain_the_earlier_crash(tmp_path):
    """The job crashed with the illegal address of the Xid 31; the Xid 94 days later is another job's."""
    job = ("[2025-03-04 10:02:30,118] INFO step 4100 loss 2.31\n" + TRACE
           + "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    doc = _run(tmp_path, {"dmesg-T.txt": XID31 + XID43 + XID94, "train-0304.log": job})
    assert doc["verdict"]["category"] == "application_error"


# ------------------------------------------------ a host marked by an arrow
SBE = ("| Field | Value |\n|---|---|\n| `DCGM_FI_DEV_ECC_SBE_AGG_TOTAL` | 31,204,118,907 |\n"
       "| `DCGM_FI_DEV_ECC_DBE_AGG_TOTAL` | 0 |\n")


def _counts(mark: dict[str, str]) -> str:
    rows = [("kq-a-03", "812", "kq-a-11", "640"), ("kq-a-07", "799", "kq-a-12", "601"),
            ("kq-a-09", "744", "kq-a-14", "587")]
    return "".join(f"{a}  {x:>5}  {mark.get(a, '   ')}   {b}  {y:>5}\n" for a, x, b, y in rows)


def test_a_host_marked_by_an_arrow_in_a_table_beside_hostless_evidence_is_its_host(tmp_path):
    doc = _run(tmp_path, {"dcgm-fields.md": SBE, "xid-counts.txt": _counts({"kq-a-07": "<--"})})
    assert doc["verdict"]["category"] == "gpu_memory_error" and doc["root_cause"]["host"] == "kq-a-07"


def test_a_table_of_hosts_without_a_mark_names_no_host(tmp_path):
    doc = _run(tmp_path, {"dcgm-fields.md": SBE, "xid-counts.txt": _counts({})})
    assert doc["verdict"]["category"] == "gpu_memory_error" and doc["root_cause"]["host"] is None


def test_two_marked_rows_name_no_host(tmp_path):
    doc = _run(tmp_path, {"dcgm-fields.md": SBE, "xid-counts.txt": _counts({"kq-a-07": "<--", "kq-a-09": "<=="})})
    assert doc["root_cause"]["host"] is None


def test_an_assignment_arrow_in_code_or_a_gpu_row_marks_no_host(tmp_path):
    notes = "r2 <- read.csv('x7.csv')\nGPU3  87C  <-- hot\nsee rank5 <- here\n"
    doc = _run(tmp_path, {"dcgm-fields.md": SBE, "notes.txt": notes})
    assert doc["root_cause"]["host"] is None


def test_the_kernels_record_of_the_ecc_error_outranks_the_jobs_report_of_it(tmp_path):
    """The job's clock runs 20 s ahead of the kernel's: its CUDA error is still the Xid 48 seen from inside,
    and the Xid names the GPU."""
    job = ("[2025-05-20 17:30:02,118] INFO step 800 loss 2.01\n" + TRACE
           + "[2025-05-20 17:30:09,440] RuntimeError: CUDA error: uncorrectable ECC error encountered\n")
    dmesg = ("[Tue May 20 17:30:29 2025] NVRM: Xid (PCI:0000:5e:00): 48, pid=60211, name=python3, Ch 00000008, "
             "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 2, "
             "subpartition 0.\n")
    doc = _run(tmp_path, {"train.log": job, "dmesg-T.txt": "root@kq-b-02:~# dmesg -T\n" + dmesg})
    assert _answer(doc) == ("gpu_memory_error", "hard") and doc["root_cause"]["gpu_pci"] == "0000:5e:00.0"
