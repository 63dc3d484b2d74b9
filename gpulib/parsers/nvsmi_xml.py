"""``nvidia-smi -q -x`` XML, every schema generation (DTD v10 to v13, Linux and Windows).

The parser does not trust the DTD version: drivers up to 525 print ``<clocks_throttle_reasons>``
even with the v12 DTD, 535+ print ``<clocks_event_reasons>``, 595+ (v13) add
``<clocks_event_reasons_counters>`` and T.Limit temperature tags. Tags are read by name
through the table in :mod:`gpulib.parsers.nvsmi_common`, shared with the ``-q`` text parser.

Safety: ``xml.etree`` never fetches the DTD named in ``<!DOCTYPE ...>`` (it is a local file name
that does not exist here anyway) and expat refuses entity-expansion bombs. Files cut short
(a collector killed at its timeout) still yield every GPU that was written, marked by a problem.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from gpulib.parsers import units
from gpulib.parsers.base import ParseResult, Problem
from gpulib.parsers.gpu_records import GpuProcess, GpuState
from gpulib.parsers.nvsmi_common import (
    FieldMap,
    header_fields,
    lost_gpus,
    merge_lost,
    norm_key,
    state_from_fields,
)

KIND = "nvidia_smi_xml"

_ROOT_TAG = "<nvidia_smi_log"


def looks_like(head: str) -> bool:
    return _ROOT_TAG in head


# Long lists no GpuState field reads (hundreds of supported clock pairs per GPU).
_SKIP = frozenset({"supported_clocks", "processes", "accounted_processes"})


def _flatten(element: ET.Element, prefix: str, out: FieldMap) -> None:
    for child in element:
        if child.tag in _SKIP:
            continue
        path = f"{prefix}/{norm_key(child.tag)}" if prefix else norm_key(child.tag)
        if len(child):
            _flatten(child, path, out)
        else:
            out.setdefault(path, ((child.text or "").strip(), None))


def _processes(gpu: ET.Element, state: GpuState) -> list[GpuProcess]:
    procs = []
    for info in gpu.iterfind("processes/process_info"):
        def field(tag: str, _info=info) -> str | None:
            node = _info.find(tag)
            return None if node is None else node.text

        try:
            pid = units.integer(field("pid"))
        except ValueError:
            pid = None
        try:
            used = units.number(field("used_memory"))
        except ValueError:
            used = None
        procs.append(GpuProcess(pid=pid, name=units.text_value(field("process_name")), used_mib=used,
                                type=units.text_value(field("type")), gpu_index=state.index,
                                pci_bus_id=state.pci_bus_id, uuid=state.uuid))
    return procs


def _read_tree(xml_text: str, source: str, problems: list[Problem]) -> tuple[ET.Element | None, list[ET.Element]]:
    """Parse the whole document; when it is broken, parse again incrementally so a truncated
    file still gives the GPUs written before the cut."""
    try:
        root = ET.fromstring(xml_text)
        return root, root.findall("gpu")
    except ET.ParseError:
        pass
    parser = ET.XMLPullParser(events=("start",))
    root = None
    gpus: list[ET.Element] = []
    try:
        parser.feed(xml_text)
        parser.close()
    except ET.ParseError as exc:
        problems.append(Problem(source, f"XML is broken or cut short ({exc}); kept what was read before it",
                                exc.position[0] if exc.position else None))
    for _event, element in parser.read_events():
        if root is None:
            root = element
        if element.tag == "gpu":
            gpus.append(element)
    return root, gpus


def parse(text: str, source: str = "<text>", *, tz: str | None = None) -> ParseResult[GpuState]:
    """Parse ``nvidia-smi -q -x`` output into one :class:`GpuState` per ``<gpu>`` (never raises)."""
    result: ParseResult[GpuState] = ParseResult(KIND)
    if not text.strip():
        result.problems.append(Problem(source, "empty file: no nvidia-smi -q -x output"))
        return result
    start = text.find("<?xml")
    if start < 0:
        start = text.find(_ROOT_TAG)
    if start < 0:
        result.problems.append(Problem(source, "not nvidia-smi XML: no <nvidia_smi_log> element"))
        result.records = lost_gpus(text, source, header_fields(None, None, None, tz))
        return result
    root, gpus = _read_tree(text[start:], source, result.problems)
    if root is None or root.tag != "nvidia_smi_log":
        result.problems.append(Problem(source, f"not nvidia-smi XML: root element is {getattr(root, 'tag', None)!r}"))
        return result

    def top(tag: str) -> str | None:
        node = root.find(tag)
        return None if node is None else node.text

    header = header_fields(top("timestamp"), top("driver_version"), top("cuda_version"), tz)
    states = []
    for index, gpu in enumerate(gpus):
        fields: FieldMap = {}
        _flatten(gpu, "", fields)
        state = state_from_fields(fields, source=source, index=index, header_pci=gpu.get("id"),
                                  header=header, problems=result.problems)
        state.processes = _processes(gpu, state)
        states.append(state)
    lost = lost_gpus(text, source, header)  # nvidia-smi prints these next to the XML, not in it
    result.records = merge_lost(states, lost)
    try:
        attached = units.integer(top("attached_gpus"))
    except ValueError:
        attached = None
    if attached is not None and len(gpus) + len(lost) < attached:
        result.problems.append(Problem(
            source, f"<attached_gpus> says {attached} but only {len(gpus)} <gpu> elements were found"))
    if not result.records:
        result.problems.append(Problem(source, "no <gpu> elements"))
    return result
