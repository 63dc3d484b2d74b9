"""Run the REAL loaders on the hostile cases (``python real_loader.py cases.json``), one process.

Each case is loaded the way its framework loads it; the output says, per case, whether the payload
ran (its sentinel file appeared) and whether the loader raised. This is the proof that every case
is a real attack: gpulib must refuse what these loaders would execute.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path


def load(loader: str, path: Path) -> None:
    import torch

    if loader in ("torch_load", "refused"):
        torch.load(path, weights_only=False)
    elif loader == "dcp_load":
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.metadata import BytesStorageMetadata

        meta = dcp.FileSystemReader(str(path)).read_metadata()  # (the .metadata payload runs here)
        state = {"model": {"w": torch.zeros(2)}}
        state.update({k: None for k, v in meta.state_dict_metadata.items() if isinstance(v, BytesStorageMetadata)})
        dcp.load(state, checkpoint_id=str(path))
    elif loader == "safetensors_load":
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as f:
            for k in f.keys():  # noqa: SIM118 - safe_open has no __iter__
                f.get_tensor(k)
    else:
        raise ValueError(loader)


def main() -> None:
    cases = json.loads(Path(sys.argv[1]).read_text())
    out = {}
    warnings.simplefilter("ignore")
    for case in cases:
        error = None
        try:
            load(case["loader"], Path(case["path"]))
        except BaseException as exc:  # noqa: BLE001 - dcp raises CheckpointException, a BaseException
            error = f"{type(exc).__name__}: {str(exc)[:200]}"
        out[case["name"]] = {"ran": bool(case["sentinel"]) and Path(case["sentinel"]).exists(), "error": error}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
