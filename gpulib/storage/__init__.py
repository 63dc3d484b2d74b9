"""``gpulib storage-probe``: can this dataset path feed every rank at once?

Storage is a named cause of interruptions: shared storage whose IOPS cannot feed all ranks
shows as low GPU utilisation with spikes, then a crash on a read timeout. The probe measures
the path the way ``fio`` does (:mod:`fio` when installed, :mod:`measure` otherwise; both only
*read* existing files, nothing is ever written under the probed path), scans its file sizes
(:mod:`scan`: many small files are a metadata/IOPS problem whatever the bandwidth), and judges
the numbers against what ranks x batch x sample size need per step (:mod:`verdict`).
"""
