"""Plain ``torch.save`` training loops as people write them: ``{"epoch", "model_state_dict",
"optimizer_state_dict", "loss"}`` in ``ckpt_epoch_N.pt`` plus ``last.pt`` and ``best.pt``, in the
zip format and the legacy one. No framework resumes them, so ``ckpt latest`` prints (as a note
under the command) a loader template with the file's own keys - and the test RUNS that template (``exec``) into a fresh model
and optimizer: it must restore the weights, the optimizer and the next epoch."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpulib.checkpoints.latest import find_latest

torch = pytest.importorskip("torch")


def _objects():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    return model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def _loop(out: Path, legacy: bool) -> dict:
    """Four epochs; best.pt is the epoch-2 save (its loss was lowest, say). Returns each epoch's state."""
    out.mkdir(parents=True)
    model, opt = _objects()
    saved = {}
    for epoch in range(1, 5):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        ck = {"epoch": epoch, "model_state_dict": model.state_dict(), "optimizer_state_dict": opt.state_dict(),
              "loss": loss.item()}
        names = [f"ckpt_epoch_{epoch}.pt", "last.pt"] + (["best.pt"] if epoch == 2 else [])
        for name in names:
            torch.save(ck, out / name, _use_new_zipfile_serialization=not legacy)
        saved[epoch] = {k: v.clone() for k, v in model.state_dict().items()}
    return saved


@pytest.fixture(scope="module", params=["zip", "legacy"])
def loop_run(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"loop_{request.param}") / "run"
    return out, _loop(out, request.param == "legacy"), request.param


def _cut(path: Path) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(path.stat().st_size * 3 // 4)


@pytest.mark.parametrize(("damage", "expect", "epoch"), [
    ("none", "last.pt", 4),  # last.pt and ckpt_epoch_4.pt hold the same epoch; best.pt (epoch 2) is older
    ("cut last.pt", "ckpt_epoch_4.pt", 4),  # killed mid-save
    ("cut last.pt & cut ckpt_epoch_4.pt", "ckpt_epoch_3.pt", 3),
    ("tmp last.pt", "last.pt", 4),  # save-to-.tmp-then-rename died before the rename: the old last.pt stands
    ("delete last.pt & delete ckpt_epoch_4.pt & delete ckpt_epoch_3.pt", "ckpt_epoch_2.pt", 2),  # ties with best.pt
])
def test_torch_save_loop_latest_and_its_loader(loop_run, tmp_path, damage, expect, epoch):
    src, saved, fmt = loop_run
    run = tmp_path / "run"
    shutil.copytree(src, run)
    for one in damage.split(" & "):
        verb, _, name = one.partition(" ")
        if verb == "cut":
            _cut(run / name)
        elif verb == "delete":
            (run / name).unlink()
        elif verb == "tmp":
            shutil.copy(run / name, run / f"{name}.tmp")
            _cut(run / f"{name}.tmp")
    report = find_latest([run])
    assert report.chosen is not None and report.chosen.name == expect, report.to_text()
    assert report.chosen.step == epoch and report.chosen.counter == "epoch", report.to_text()
    assert any("only the epoch" in x for x in report.lacks), report.to_text()
    if verb == "tmp":
        assert any(x.endswith("last.pt.tmp") for x in report.leftovers), report.to_text()
    assert report.resume_command.endswith(f"--resume {report.resume_from}"), report.resume_command
    template = next(a for a in report.advice if "your loader" in a).split("with the keys in it: ", 1)[1]
    assert "weights_only=True" in template and "ck['model_state_dict']" in template, template
    model, opt = _objects()
    scope = {"torch": torch, "model": model, "optimizer": opt}
    exec(template, scope)  # the printed loader, as the user would paste it
    assert scope["start_epoch"] == epoch + 1
    assert all(torch.equal(v, saved[epoch][k]) for k, v in model.state_dict().items())
    assert opt.state_dict()["state"], "the optimizer's momentum buffers were not restored"
    for path, _reason in report.rejected:  # what was refused really does not load
        with pytest.raises(Exception):  # noqa: B017 - whatever torch.load raises on a cut file
            torch.load(path, weights_only=True)


def test_an_epoch_is_never_subtracted_from_a_logged_step(loop_run, tmp_path):
    """Notebook 07 shows "steps lost" = last logged step - the checkpoint's step: an epoch there
    would claim thousands of steps lost (or none), so an epoch-counted checkpoint has no step."""
    pd = pytest.importorskip("pandas")
    from gpulib.notebook.steps import checkpoint_candidates

    src, _saved, _fmt = loop_run
    report = find_latest([src])
    log = pd.DataFrame({"step": [1200, 1250], "time": [None, None]})
    for rows in (checkpoint_candidates(report, log), checkpoint_candidates(report.to_dict(), log)):
        assert rows[0]["verdict"] == "recommended" and rows[0]["steps_lost"] is None, rows[0]
