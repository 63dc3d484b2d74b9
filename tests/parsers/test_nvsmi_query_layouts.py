"""``nvidia-smi -q`` GPU blocks of different layouts in one file, read through the per-layout plan.

:func:`gpulib.parsers.nvsmi_common.state_from_fields` works out once per layout (the block's field
paths, in order) where each GpuState field, ECC count and clocks reason is. These cases pin that a
plan made for one layout is never applied to a block of another, that sections gpulib does not
know are ignored, and that the ERR!/lost tests read non-ASCII text the way the patterns do.
"""

from __future__ import annotations

from gpulib.parsers import nvsmi_query

BANNER = "==============NVSMI LOG==============\n\nTimestamp : Mon Feb 10 03:00:00 2026\nDriver Version : 550.90.07\n" \
         "CUDA Version : 12.4\n\nAttached GPUs : {n}\n"

OLD_ECC = """GPU 00000000:18:00.0
    Product Name                          : NVIDIA A100-SXM4-80GB
    Temperature
        GPU Current Temp                  : 61 C
    ECC Errors
        Volatile
            Single Bit
                Total                     : 7
            Double Bit
                Total                     : N/A
    Clocks Throttle Reasons
        SW Thermal Slowdown               : Active
        Unknown                           : Not Active
"""

NEW_ECC = """GPU 00000000:2A:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
    Temperature
        GPU Current Temp                  : 88 C
    Vendor Specific Section
        Frobnication Level                : 11
        Nested Unknown
            Temperature                   : 12 C
    ECC Errors
        Volatile
            SRAM Correctable              : 1
            SRAM Uncorrectable Parity     : 2
            DRAM Correctable              : 4
            DRAM Uncorrectable            : 5
    Clocks Event Reasons
        HW Slowdown                       : Active
        Mystery Reason                    : Active
    Clocks Event Reasons Counters
        SW Thermal Slowdown               : 120 us
"""


def _text(*blocks: str) -> str:
    return BANNER.format(n=len(blocks)) + "\n" + "\n".join(blocks)


def _parse(*blocks: str):
    return nvsmi_query.parse(_text(*blocks), "q.txt", tz="UTC")


def test_each_layout_reads_its_own_paths_in_any_block_order():
    for blocks in ((OLD_ECC, NEW_ECC, OLD_ECC), (NEW_ECC, OLD_ECC, NEW_ECC)):
        states = _parse(*blocks).records
        for state in states:
            if state.pci_bus_id == "0000:18:00.0":
                assert (state.ecc_volatile_sbe, state.ecc_volatile_dbe, state.temp_c) == (7, None, 61)
                assert state.throttle_reasons == ["sw_thermal_slowdown"] and state.throttle_counters_us == {}
            else:
                # new schema: corrected = DRAM + SRAM, uncorrected = DRAM + SRAM parity
                assert (state.ecc_volatile_sbe, state.ecc_volatile_dbe, state.temp_c) == (5, 7, 88)
                assert state.throttle_reasons == ["hw_slowdown"]
                assert state.throttle_counters_us == {"sw_thermal_slowdown": 120}


def test_unknown_sections_are_ignored_and_unknown_reasons_reported_once_per_gpu():
    blocks = (NEW_ECC, NEW_ECC.replace("2A:00.0", "3A:00.0"))
    result = _parse(*blocks)
    assert len(result.records) == 2 and all(s.temp_c == 88 for s in result.records)  # not the vendor section's 12 C
    mystery = [n for n, line in enumerate(_text(*blocks).splitlines(), 1) if "Mystery Reason" in line]
    assert [(p.line, "unknown clocks event reason" in p.message) for p in result.problems] == [
        (mystery[0], True), (mystery[1], True)]


def test_a_refused_value_is_reported_where_it_is_in_each_layout():
    result = _parse(OLD_ECC.replace(": 7", ": seven"), NEW_ECC.replace("DRAM Correctable              : 4",
                                                                      "DRAM Correctable              : four"))
    old, new = result.records
    assert old.ecc_volatile_sbe is None and new.ecc_volatile_sbe == 1  # the parts that still read
    assert [p.message.split(": ", 2)[1] for p in result.problems if "four" in p.message or "seven" in p.message] == [
        "ecc_errors/volatile/single_bit/total", "ecc_errors/volatile/dram_correctable"]


def test_err_and_lost_are_found_in_non_ascii_text():
    block = OLD_ECC.replace("NVIDIA A100-SXM4-80GB", "NVIDIA A100 — Ärger").replace("61 C", "[ERR!]")
    state = _parse(block).records[0]
    assert "temp_c" in state.unreadable and state.temp_c is None
    lost = OLD_ECC.replace("NVIDIA A100-SXM4-80GB", "GPU Is Lost — Ärger")
    state = _parse(lost).records[0]
    assert state.lost and state.lost_reason == "product_name: GPU Is Lost — Ärger"
