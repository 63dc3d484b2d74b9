"""The c10d store lives on one node (torchrun's ``--rdzv_endpoint`` host, or the agent that says it
hosts the store). When that node stops first, every other node's rendezvous / TCPStore calls fail:
those are the cascade, and the culprit is the store's host. Controls: a start-up store error (the
job never got going) stays the cause, and the pointer does not go to a store host that itself
reports the store errors or is not known. Store errors after the job reported completion are
teardown noise (the store's owner exited before its clients), not a failure."""

from __future__ import annotations

from gpulib.diagnose import diagnose

LAUNCH = ("ops@{host}:~/fit$ torchrun --rdzv_backend c10d --rdzv_id 55 --rdzv_endpoint {store}:29400 --nnodes 2 "
          "--nproc_per_node 4 fit.py\n")
STOPPED = ("WARNING:torch.distributed.elastic.agent.server.api:Received 15 death signal, shutting down workers\n"
           "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 9001 closing signal SIGTERM\n"
           "torch.distributed.elastic.multiprocessing.api.SignalException: Process 8990 got signal: 15\n")
LOST = ("WARNING:torch.distributed.elastic.rendezvous.dynamic_rendezvous:The node 'wk-2_4410_0' has failed to send "
        "a keep-alive heartbeat to the rendezvous '55' due to an error of type RendezvousConnectionError.\n"
        "RuntimeError: Broken pipe\n"
        "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has "
        "failed. See inner exception for details.\n")
STEP = "step 120/4000 loss 2.310 (torch.distributed world size 8)\n"
NEVER_STARTED = ("[E socket.cpp:860] [c10d] The client socket has timed out after 60s while trying to connect to "
                 "(hub-1, 29400).\n"
                 "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d "
                 "store has failed. See inner exception for details.\n")


def _on(host: str, store: str) -> str:
    """A pasted console: the prompt names the node, the launch command the store's host."""
    return LAUNCH.format(host=host, store=store)


def _dir(tmp_path, files: dict[str, str]):
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def _write(tmp_path, files: dict[str, str]):
    got = diagnose([_dir(tmp_path, files)]).to_dict()
    root = got.get("root_cause") or {}
    return got["verdict"]["interruption"], root.get("category") or got["verdict"]["category"], root.get("host")


def test_store_host_stopped_first_is_the_culprit_not_the_workers(tmp_path):
    got = _write(tmp_path, {"hub-1/run.log": _on("hub-1", "hub-1") + STOPPED,
                            "wk-2/run.log": _on("wk-2", "hub-1") + LOST})
    assert got == ("soft", "application_error", "hub-1")


def test_the_agent_that_hosts_the_store_names_it_without_a_command_line(tmp_path):
    hosts = "INFO:torch.distributed.elastic.rendezvous.c10d_rendezvous_backend:Process 8990 hosts the TCP store " \
            "for the C10d rendezvous backend.\n"
    got = _write(tmp_path, {"hub-1/run.log": "ops@hub-1:~/fit$ bash fit.sh\n" + STEP + hosts + STOPPED,
                            "wk-2/run.log": "ops@wk-2:~/fit$ bash fit.sh\n" + STEP + LOST})
    assert got == ("soft", "application_error", "hub-1")


def test_control_a_real_failure_on_the_store_host_wins_over_its_agent_signal(tmp_path):
    oom = ("[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total "
           "capacity of 79.15 GiB of which 1.10 GiB is free.\n")
    got = _write(tmp_path, {"hub-1/run.log": _on("hub-1", "hub-1") + oom + STOPPED,
                            "wk-2/run.log": _on("wk-2", "hub-1") + LOST})
    assert got == ("soft", "cuda_oom", "hub-1")


def test_control_store_error_before_anything_ran_stays_the_start_up_cause(tmp_path):
    got = _write(tmp_path, {"hub-1/run.log": _on("hub-1", "hub-1") + STOPPED,
                            "wk-2/run.log": _on("wk-2", "hub-1") + NEVER_STARTED})
    assert got[1] == "network_fabric" and got[2] != "hub-1"


def test_control_unknown_store_host_points_nowhere(tmp_path):
    got = _write(tmp_path, {"hub-1/run.log": "ops@hub-1:~/fit$ bash fit.sh\n" + STEP + STOPPED,
                            "wk-2/run.log": _on("wk-2", "elsewhere-9") + LOST})
    assert got[2] != "hub-1"



TEARDOWN = ("[rank1]:[W423 10:41:09.551207834 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=61, "
            "addr=[localhost]:51822, remote=[localhost]:37215): Connection reset by peer\n"
            "[rank1]:[W423 10:41:09.561118420 ProcessGroupNCCL.cpp:1771] [PG ID 0 PG GUID 0(default_pg) Rank 1] Failed "
            "to check the \"should dump\" flag on TCPStore, (maybe TCPStore server has shut down too early), with "
            "error: Connection reset by peer\n")


def _store_findings(tmp_path, text):
    (tmp_path / "run.log").write_text(text)
    got = diagnose([tmp_path]).to_dict()
    return got["verdict"]["interruption"], {f["id"].split("-r")[0]: f["category"] for f in got["findings"]}


def test_store_errors_after_the_job_reported_completion_are_teardown_noise(tmp_path):
    verdict, found = _store_findings(tmp_path, STEP + "Training finished. 40 steps in 1:31:08.\n" + TEARDOWN)
    assert verdict == "none" and found == {"store-teardown": "none"}


def test_control_store_errors_before_the_completion_line_are_not_teardown(tmp_path):
    _verdict, found = _store_findings(tmp_path, STEP + TEARDOWN + "Training finished. 40 steps in 1:31:08.\n")
    assert "store-teardown" not in found and found.get("store") == "network_fabric"


BIND = ("[W socket.cpp:436] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in "
        "use).\n[E socket.cpp:472] [c10d] The server socket has failed to listen on any local network address.\n")
CLOSED = "torch.distributed.elastic.rendezvous.api.RendezvousClosedError\n"


def test_a_taken_store_port_is_the_cause_of_the_later_rendezvous_error(tmp_path):
    verdict, found = _store_findings(tmp_path, BIND + STEP + CLOSED)
    assert verdict == "soft" and found.get("sig-port-in-use") == "network_fabric" and "store" in found


def test_control_another_service_port_in_use_is_not_the_store(tmp_path):
    text = ("E0303 11:02:10 tensorboard: [Errno 98] Address already in use: port 6006\n" + STEP + CLOSED)
    _verdict, found = _store_findings(tmp_path, text)
    assert "sig-port-in-use" not in found


def test_store_host_without_evidence_of_its_own_is_where_the_symptoms_point(tmp_path):
    """Only a worker's console: its socket errors are the store's cascade, not its own fault."""
    lost = LOST.replace("RendezvousConnectionError: The connection", "RendezvousTimeoutError: The connection")
    got = diagnose([_dir(tmp_path, {"wk-2/run.log": _on("wk-2", "hub-1") + STEP + lost})]).to_dict()
    assert got["verdict"]["interruption"] == "unknown" and "hub-1" in got["verdict"]["summary"]
    assert (got.get("root_cause") or {}).get("host") != "wk-2"
