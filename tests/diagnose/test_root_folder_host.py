"""The folder the user passes is named after the incident as often as after a node: it names a host
only when numbered as nodes are."""

from gpulib.evidence.gather import gather

SEL = "   1 | 02/03/2031 | 04:05:06 | Power Unit #0x01 | Power off/down | Asserted\n"


def _hosts(root):
    return {f.host for f in gather([root]).files}


def test_a_word_named_root_folder_is_no_host(tmp_path):
    root = tmp_path / "in"
    root.mkdir()
    (root / "sel.txt").write_text(SEL)
    (root / "sinfo.txt").write_text("REASON               USER      TIMESTAMP           NODELIST\n"
                                    "Not responding       slurm     2031-02-03T04:06:00 qz0412\n")
    assert "in" not in _hosts(root)


def test_a_numbered_root_folder_still_names_its_node(tmp_path):
    root = tmp_path / "qz0412"
    root.mkdir()
    (root / "sel.txt").write_text(SEL)
    assert _hosts(root) == {"qz0412"}
